"""Host A/B on the device, interleaved in one process (the H200 host drifts over seconds, session
32): new plans of a seen batch shape copying their device tables (the checkout) against sharing one
kept copy per shape and stream (``exp/shared-device-tables.patch``: ``StagedInt32.shared_to``).
Per round and label: kernel_bench.py's serving time (a fresh plan every call, do_bench median) and
its host microseconds (plan, call with a fresh plan, call with the cached plan). Run from a checkout
with the patch applied (the copy label swaps ``shared_to`` for ``to``):

    python bench_serving/results/h200-session36/exp/host_shared_ab.py [--rounds 8] > $OUT/host_ab.txt
"""
import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import kernel_bench as kb  # noqa: E402
from qla_serve.plan import StagedInt32  # noqa: E402

ROWS = [(2, 8, "1x16384"), (2, 8, "1x8192"), (4, 16, "1x16384"), (16, 32, "1x8192"), (8, 32, "1x32768"),
        (16, 64, "1x8192"), (2, 8, "8192x4"), (16, 32, "1024x8")]
SHARED = StagedInt32.shared_to


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    print("heads mix | serving ms copy / shared (ratio) | host us plan, call_fresh, call_cached: copy / shared")
    for H, HV, mix in ROWS:
        x = kb.make_inputs(kb.mix_seqlens(mix), H, HV)
        kernel, serving = kb.qla_fns(x)
        kernel(); torch.cuda.synchronize()
        res = {lab: {"serving": [], "plan": [], "call_fresh": [], "call_cached": []} for lab in ("copy", "shared")}
        for _ in range(args.rounds):
            for lab in ("copy", "shared"):
                StagedInt32.shared_to = SHARED if lab == "shared" else (lambda self, d: self.to(d))
                res[lab]["serving"].append(kb.bench(serving))
                for k, v in kernel.host_us(reps=10).items():
                    short = k[len("qla_host_"):-len("_us")]
                    if short in res[lab]:
                        res[lab][short].append(v)
        StagedInt32.shared_to = SHARED
        med = {lab: {k: statistics.median(v) for k, v in d.items()} for lab, d in res.items()}
        c, s = med["copy"], med["shared"]
        print(f"{H}/{HV} {mix} | {c['serving']:.3f} / {s['serving']:.3f} (x{s['serving'] / c['serving']:.3f}) | "
              + ", ".join(f"{c[k]:.0f} / {s[k]:.0f}" for k in ("plan", "call_fresh", "call_cached")), flush=True)


if __name__ == "__main__":
    main()
