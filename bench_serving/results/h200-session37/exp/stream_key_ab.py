"""Host A/B on the device, interleaved in one process: StagedInt32.shared_to's stream key through
torch's raw-stream query (``torch._C._cuda_getCurrentRawStream``, the checkout) against the public
``torch.cuda.current_stream(i).cuda_stream`` (call A's code). Same rows and measures as session 36's
``exp/host_shared_ab.py``: kernel_bench.py's serving time (a fresh plan every call, do_bench median)
and host microseconds (plan, call with a fresh plan, call with the cached plan).

    python bench_serving/results/h200-session37/exp/stream_key_ab.py [--rounds 8] > $OUT/stream_key_ab.txt
"""
import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import kernel_bench as kb  # noqa: E402
import qla_serve.plan as qplan  # noqa: E402

ROWS = [(2, 8, "1x16384"), (2, 8, "1x8192"), (4, 16, "1x16384"), (16, 32, "1x8192"), (8, 32, "1x32768"),
        (16, 64, "1x8192"), (2, 8, "8192x4"), (16, 32, "1024x8")]
KEYS = {"public": qplan._current_stream_public, "raw": qplan._current_raw_stream}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    dev = torch.cuda.current_device()
    assert KEYS["raw"](dev) == KEYS["public"](dev), "the two stream queries disagree"
    print("heads mix | serving ms public / raw (ratio) | host us plan, call_fresh, call_cached: public / raw")
    for H, HV, mix in ROWS:
        x = kb.make_inputs(kb.mix_seqlens(mix), H, HV)
        kernel, serving = kb.qla_fns(x)
        kernel(); torch.cuda.synchronize()
        res = {lab: {"serving": [], "plan": [], "call_fresh": [], "call_cached": []} for lab in KEYS}
        for r in range(args.rounds):
            for lab in (("public", "raw") if r % 2 == 0 else ("raw", "public")):
                qplan._current_raw_stream = KEYS[lab]
                res[lab]["serving"].append(kb.bench(serving))
                for k, v in kernel.host_us(reps=10).items():
                    short = k[len("qla_host_"):-len("_us")]
                    if short in res[lab]:
                        res[lab][short].append(v)
        qplan._current_raw_stream = KEYS["raw"]
        med = {lab: {k: statistics.median(v) for k, v in d.items()} for lab, d in res.items()}
        p, q = med["public"], med["raw"]
        print(f"{H}/{HV} {mix} | {p['serving']:.3f} / {q['serving']:.3f} (x{q['serving'] / p['serving']:.3f}) | "
              + ", ".join(f"{p[k]:.0f} / {q[k]:.0f}" for k in ("plan", "call_fresh", "call_cached")), flush=True)


if __name__ == "__main__":
    main()
