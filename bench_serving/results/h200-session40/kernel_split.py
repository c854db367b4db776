"""Where a QLA prefill's GPU time goes, kernel by kernel (torch profiler, 10 calls of the cached
path, the same inputs as kernel_bench.py), and with ``--backends qla,flashqla`` FlashQLA's kernels on the
same rows. Session 40 wrote it for the long GPU-bound rows that issue 3 (b) and issue 4 miss.

    python kernel_split.py --rows 16/32:1x32768,16/64:1x32768 [--backends qla,flashqla] > split.md
"""
import argparse
import os
import sys
from collections import defaultdict

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../"))
from kernel_bench import BACKENDS, device_events, make_inputs, mix_seqlens  # noqa: E402


def split(fn, reps=10):
    """µs per call of each kernel name (its first 60 characters)."""
    per = defaultdict(float)
    for e in device_events(fn, reps):
        per[e.name[:60]] += (e.time_range.end - e.time_range.start) / reps
    return per


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="16/32:1x32768,16/64:1x32768,16/32:8192x4,16/64:8192x4")
    ap.add_argument("--backends", default="qla", help="e.g. qla,flashqla (FlashQLA JITs ~70-90 s per head config)")
    args = ap.parse_args()
    print("| heads | row | backend | kernel | µs per call | share |\n|---|---|---|---|---|---|")
    for spec in args.rows.split(","):
        heads, mix = spec.split(":")
        H, HV = (int(x) for x in heads.split("/"))
        for b in args.backends.split(","):
            try:
                kernel, _ = BACKENDS[b](make_inputs(mix_seqlens(mix), H, HV))
                per = split(kernel)
            except Exception as exc:  # noqa: BLE001 — an anchor that cannot run the row
                print(f"| {heads} | {mix} | {b} | error {exc!r:.80} | | |")
                continue
            tot = sum(per.values())
            for name, us in sorted(per.items(), key=lambda kv: -kv[1]):
                print(f"| {heads} | {mix} | {b} | `{name}` | {us:.1f} | {us / tot:.2f} |")
            print(f"| {heads} | {mix} | {b} | **sum** | **{tot:.1f}** | |", flush=True)
            plan = getattr(kernel, "plan", None)
            if plan is not None:
                # CP tables hold device tensors: their partition counts say enough
                data = {k: getattr(v, "parts", v) for k, v in plan.kernel_data.items()}
                print(f"<!-- {b} {heads} {mix} plan {data} -->")
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
