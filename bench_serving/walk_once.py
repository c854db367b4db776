"""Drive one backend's prefill a few times on one benchmark row, for a profiler to watch
(bench_serving/ncu_walk.sh): the same random inputs as kernel_bench.py, ``--calls`` calls of its cached
("kernel") path, the last one inside an NVTX range named ``profile`` (ncu's --nvtx-include).

    python bench_serving/walk_once.py --heads 16/32 --mix 8192x4 [--calls 4] [--backend flashinfer]

For qla: QLA_CP=0 in the environment keeps a long sequence in one walk (no CP phases);
QLA_BLOCK_V forces the V-block, as in kernel_bench.py."""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_bench import BACKENDS, SEQLENS, make_inputs  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heads", default="16/32")
    ap.add_argument("--mix", default="8192x4", choices=sorted(SEQLENS))
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--backend", default="qla", choices=sorted(BACKENDS))
    args = ap.parse_args()
    H, HV = (int(x) for x in args.heads.split("/"))
    kernel, _ = BACKENDS[args.backend](make_inputs(SEQLENS[args.mix], H, HV))
    for _ in range(args.calls - 1):
        kernel()
    torch.cuda.synchronize()
    with torch.cuda.nvtx.range("profile"):
        kernel()
    torch.cuda.synchronize()
    plan = getattr(kernel, "plan", None)
    print(f"{args.backend} {args.heads} {args.mix}: {args.calls} calls"
          + (f", plan {plan.kernel_data}" if plan is not None else ""))


if __name__ == "__main__":
    main()
