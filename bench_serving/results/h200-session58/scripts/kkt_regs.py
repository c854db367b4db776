"""ptxas -v for a kkt_solve.py copy at several MIN_BLOCKS (registers, spills), on the CPU machine:

    TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 .venv/bin/python bench_serving/results/h200-session58/scripts/kkt_regs.py \\
        kernels/hopper/kkt_solve.py 16/32 4,5,6

The copy's MIN_BLOCKS is overridden before each build (it caps the registers at 65536 / (128 ·
MIN_BLOCKS)); its own PASS_CONFIGS are used, as hopper.kkt_kernel uses them.
"""
import importlib.util
import os
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 4))
sys.path.insert(0, os.path.join(ROOT, "bench_serving"))
sys.path.insert(0, ROOT)

import tilelang  # noqa: E402
from sass_count import nvcc_cubin  # noqa: E402


def main(path: str, heads: str, min_blocks: str) -> None:
    spec = importlib.util.spec_from_file_location("kkt_copy", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    H, HV = (int(x) for x in heads.split("/"))
    for mb in (int(x) for x in min_blocks.split(",")):
        mod.MIN_BLOCKS = mb
        func = mod.build_kkt_solve(H, HV, 128, "bfloat16", False, (H * 128, HV, HV))
        kernel = tilelang.compile(func, out_idx=None, pass_configs=mod.PASS_CONFIGS)
        with tempfile.TemporaryDirectory() as tmp:
            _, done = nvcc_cubin(kernel.get_kernel_source(), tmp, "-Xptxas", "-v", "-w", "--use_fast_math")
        info = [line.strip() for line in done.stderr.splitlines() if "registers" in line or "spill" in line]
        print(f"{os.path.basename(path)} {heads} MIN_BLOCKS={mb}:", " | ".join(info))


if __name__ == "__main__":
    main(*sys.argv[1:4])
