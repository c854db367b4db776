"""The walk's two forms interleaved in one process (runbook item 0's open question): on rows whose
items about fill the 132 SMs, does the persistent walk (one CTA per SM, items dealt longest first)
beat one CTA per item? Session 36's table had 16/32 8192×4 at ×1.043 (GPU-busy, persistent over
one CTA per item) where session 34's had ×0.979: one-shot figures taken minutes apart. Here both
forms alternate, round after round, on the same inputs and the same plan width, and the ratio is the
median of per-round ratios.

    python bench_serving/results/h200-session37/exp/walk_form_ab.py [--rounds 8] > $OUT/walk_ab.txt
"""
import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import kernel_bench as kb  # noqa: E402

# (H, HV, mix): 128 items (16/32 and 8/32 8192×4 at V-block 128), 256 items (16/64 8192×4), the
# short rows where the persistent form is the plan's choice today
ROWS = [(16, 32, "8192x4"), (8, 32, "8192x4"), (16, 64, "8192x4"), (16, 32, "1024x8"), (16, 32, "16x512"),
        (8, 32, "1024x8"), (2, 8, "1024x8"), (2, 8, "16x512")]


def main() -> None:
    import qla_serve

    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    dev = torch.device("cuda", torch.cuda.current_device())
    print("heads mix | V-block, plan's form | GPU-busy ms persistent / one CTA per item (median of round ratios) "
          "| do_bench ms persistent / one CTA per item")
    for H, HV, mix in ROWS:
        x = kb.make_inputs(kb.mix_seqlens(mix), H, HV)
        out = torch.empty_like(x["v"])
        hinit = torch.ones(x["N"], dtype=torch.bool, device="cuda")
        key = ("hopper", HV, 128)
        probe = kb.qla_plan(x["cu_cpu"], dev)
        from qla_serve.kernels import hopper
        hopper.prepare_plan(probe, HV, 128)
        if any(k[0] == "hopper-cp" and v is not None for k, v in probe.kernel_data.items()):
            print(f"{H}/{HV} {mix} | CP: no walk form to compare", flush=True)
            continue
        chosen = probe.kernel_data[key]
        plans = {}
        for form in (True, False):
            p = kb.qla_plan(x["cu_cpu"], dev)
            p.kernel_data[key] = {"block_v": chosen["block_v"], "persistent": form}
            plans[form] = p

        def call(p):
            qla_serve.gdn_prefill(x["q"], x["k"], x["v"], x["g"], x["beta"], state_pool=x["pool"],
                                  state_indices=x["idx"], cu_seqlens=p.cu_seqlens, has_initial_state=hinit,
                                  plan=p, out=out, null_slot=0)
        fns = {form: (lambda p=p: call(p)) for form, p in plans.items()}
        for fn in fns.values():
            fn()
        torch.cuda.synchronize()
        gpu = {True: [], False: []}
        wall = {True: [], False: []}
        for r in range(args.rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            for form in order:
                gpu[form].append(kb.gpu_ms(fns[form], reps=20))
                wall[form].append(kb.bench(fns[form]))
        ratios = [a / b for a, b in zip(gpu[True], gpu[False])]
        print(f"{H}/{HV} {mix} | {chosen['block_v']}, {'persistent' if chosen['persistent'] else 'cta-per-item'} | "
              f"{statistics.median(gpu[True]):.4f} / {statistics.median(gpu[False]):.4f} "
              f"(x{statistics.median(ratios):.3f}, rounds {min(ratios):.3f}-{max(ratios):.3f}) | "
              f"{statistics.median(wall[True]):.4f} / {statistics.median(wall[False]):.4f}", flush=True)


if __name__ == "__main__":
    main()
