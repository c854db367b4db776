"""Static SASS instruction counts of the Hopper kernels, by warp role, on a machine without a GPU.

    python bench_serving/sass_count.py [--heads 16/32] [--block-v 64] [--phase 0] [--kernel fwd|kkt]
                                       [--fused-fwd FILE] [--kkt-solve FILE] [--top 12]

Builds one variant with TileLang for sm_90a (TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100; the disk
cache serves it when it is there), compiles the generated device_kernel.cu again with
``nvcc -lineinfo`` and disassembles the cubin with ``nvdisasm -g``, then sums instructions per line
of the generated source. The fused walk's lines are split by its three ``setmaxnreg`` calls into
the consumers, WG_P and the IO warps; kkt_solve is one region. ``--fused-fwd`` / ``--kkt-solve``
count another version of fused_fwd.py / kkt_solve.py (e.g. ``git show REV:kernels/hopper/fused_fwd.py
> old.py``). The first line also gives the whole kernel's total, the instructions inlined from
TileLang's and CUTLASS's headers included: that is where ``T.gemm``'s mma and ldmatrix are.

The counts are what the code contains (a loop body once), not instructions executed, and not time:
they say where a kernel's instructions are, and whether an edit removed some. Each region also
reports its local-memory instructions (STL / LDL: register spills); session 24 found the V-block-128
consumers spilling inside the chunk loop this way (``--block-v 128 --pool-dtype bfloat16``). nvdisasm comes from
$NVDISASM, PATH, or the copy Triton bundles (``triton/backends/nvidia/bin``, e.g. in .venv-vllm).
"""
from __future__ import annotations

import argparse
import collections
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINE = re.compile(r'//## File "([^"]+)", line (\d+)')
INSTR = re.compile(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")


def find_nvdisasm() -> str:
    found = os.environ.get("NVDISASM") or shutil.which("nvdisasm")
    if found:
        return found
    spec = importlib.util.find_spec("triton")
    roots = [os.path.dirname(spec.origin)] if spec and spec.origin else []
    roots += glob.glob(os.path.join(ROOT, ".venv*", "lib", "python3*", "site-packages", "triton"))
    for root in roots:
        path = os.path.join(root, "backends", "nvidia", "bin", "nvdisasm")
        if os.path.exists(path):
            return path
    raise SystemExit("nvdisasm not found: set NVDISASM (Triton bundles one under triton/backends/nvidia/bin)")


def fast_math(kernel: str) -> bool:
    """Whether TileLang builds this kernel with ``--use_fast_math`` (its PASS_CONFIGS): the count
    compiles the same way, so that its SASS is the built kernel's (session 24 matched kkt_solve's
    to an ncu source page address by address only with it)."""
    import tilelang

    from qla_serve.kernels.hopper import fused_fwd, kkt_solve

    configs = kkt_solve.PASS_CONFIGS if kernel == "kkt" else fused_fwd.PASS_CONFIGS
    return bool(configs.get(tilelang.PassConfigKey.TL_ENABLE_FAST_MATH, False))


def kernel_source(args) -> str:
    from qla_serve.kernels import hopper

    # the builders are looked up on the package at call time: another file takes the module's place
    for attr, path in (("fused_fwd", args.fused_fwd), ("kkt_solve", args.kkt_solve)):
        if path:
            name = f"qla_serve.kernels.hopper.{attr}"
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.modules[name] = module
            setattr(hopper, attr, module)
    H, HV = (int(x) for x in args.heads.split("/"))
    var = hopper.Variant(H, HV, pool_dtype=args.pool_dtype, state_layout=args.layout, block_v=args.block_v)
    kern = hopper.kkt_kernel_for(var) if args.kernel == "kkt" else hopper.fwd_kernel(var, phase=args.phase)
    return kern.get_kernel_source()


def nvcc_cubin(source: str, tmp: str, *flags: str, check: bool = True) -> tuple[str, subprocess.CompletedProcess]:
    """A TileLang kernel's generated CUDA source compiled for sm_90a by nvcc (TileLang's and CUTLASS's
    headers, C++20, -O3) into ``tmp``/k.cubin, with ``flags`` added (e.g. ``-Xptxas -v``: ptxas's
    registers, spills and wgmma warnings such as C7512 land in the run's stderr). Returns the cubin's
    path and nvcc's run; ``check``: a failed compile prints nvcc's stderr and raises."""
    from tilelang.env import CUTLASS_INCLUDE_DIR, TILELANG_TEMPLATE_PATH

    src = os.path.join(tmp, "device_kernel.cu")
    with open(src, "w") as f:
        f.write(source)
    cubin = os.path.join(tmp, "k.cubin")
    done = subprocess.run(["nvcc", "--cubin", "-O3", "-gencode", "arch=compute_90a,code=sm_90a", "-std=c++20",
                           f"-I{TILELANG_TEMPLATE_PATH}", f"-I{CUTLASS_INCLUDE_DIR}", *flags, "-o", cubin, src],
                          capture_output=True, text=True)
    if check and done.returncode:
        sys.stderr.write(done.stderr)
        done.check_returncode()
    return cubin, done


def count(source: str, nvdisasm: str, use_fast_math: bool = False
          ) -> tuple[dict[int, collections.Counter], list[str], collections.Counter]:
    """{source line: Counter(opcode)} for the lines of ``source`` (instructions of inlined headers
    are left out: they belong to no line of the kernel's own code), the source's lines, and the
    whole kernel's Counter(opcode), inlined headers included."""
    with tempfile.TemporaryDirectory() as tmp:
        cubin, _ = nvcc_cubin(source, tmp, "-lineinfo", "-w", *(["--use_fast_math"] if use_fast_math else []))
        sass = subprocess.run([nvdisasm, "-g", "-c", cubin], check=True, capture_output=True, text=True).stdout
    return parse(sass), source.split("\n"), totals(sass)


def parse(sass: str) -> dict[int, collections.Counter]:
    """nvdisasm -g text → {line of device_kernel.cu: Counter(opcode)}."""
    per_line: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    line = None
    for text in sass.splitlines():
        m = LINE.search(text)
        if m:
            line = int(m.group(2)) if m.group(1).endswith("device_kernel.cu") else None
            continue
        m = INSTR.match(text)
        if m and line is not None:
            per_line[line][m.group(1)] += 1
    return per_line


def totals(sass: str) -> collections.Counter:
    """nvdisasm text → Counter(opcode) of every instruction, inlined headers included."""
    return collections.Counter(m.group(1) for m in map(INSTR.match, sass.splitlines()) if m)


def spill_summary(ops: collections.Counter) -> str:
    """Local-memory loads and stores among a region's instructions: register spills, or a local
    array indexed at run time."""
    return f"STL {ops.get('STL', 0)}, LDL {ops.get('LDL', 0)}"


def regions(lines: list[str], kernel: str) -> list[tuple[str, int, int]]:
    """(name, first line, last line), 1-based. The walk: split at its setmaxnreg calls, one per
    consumer warpgroup (two at V-block 128), then WG_P's and the IO warps'."""
    if kernel == "kkt":
        return [("kkt_solve", 1, len(lines))]
    marks = [i + 1 for i, text in enumerate(lines) if "tl::warpgroup_reg_" in text]
    if len(marks) < 3:
        return [("walk", 1, len(lines))]
    return [("consumers", marks[0], marks[-2] - 1), ("WG_P", marks[-2], marks[-1] - 1), ("IO", marks[-1], len(lines))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", choices=("fwd", "kkt"), default="fwd")
    ap.add_argument("--heads", default="16/32")
    ap.add_argument("--block-v", type=int, default=64)
    ap.add_argument("--phase", type=int, default=0, choices=(0, 1, 3))
    ap.add_argument("--pool-dtype", default="float32")
    ap.add_argument("--layout", default="vk")
    ap.add_argument("--fused-fwd", help="another fused_fwd.py to count instead of the checkout's")
    ap.add_argument("--kkt-solve", help="another kkt_solve.py to count instead of the checkout's")
    ap.add_argument("--top", type=int, default=12, help="show the source lines with the most instructions")
    args = ap.parse_args(argv)
    os.environ.setdefault("TILELANG_DEFAULT_TARGET", "nvidia/nvidia-h100")     # sm_90a without a GPU
    per_line, lines, whole = count(kernel_source(args), find_nvdisasm(), fast_math(args.kernel))
    other = args.fused_fwd if args.kernel == "fwd" else args.kkt_solve
    print(f"{args.kernel} {args.heads} V-block {args.block_v} phase {args.phase} {args.pool_dtype} {args.layout}"
          f"{' (' + other + ')' if other else ''}: "
          f"{sum(sum(c.values()) for c in per_line.values())} instructions on the kernel's own lines, "
          f"{sum(whole.values())} in all ({', '.join(f'{k} {whole[k]}' for k in ('HMMA', 'HGMMA', 'LDSM', 'LDS', 'STS', 'BAR') if whole[k])})")
    for name, a, b in regions(lines, args.kernel):
        ops = collections.Counter()
        for n in range(a, b + 1):
            ops.update(per_line.get(n, {}))
        print(f"  {name:10s} lines {a}-{b}: {sum(ops.values())}  ({', '.join(f'{k} {v}' for k, v in ops.most_common(10))})"
              f"; local memory (spills): {spill_summary(ops)}")
    for n, ops in sorted(per_line.items(), key=lambda kv: -sum(kv[1].values()))[:args.top]:
        print(f"  {sum(ops.values()):5d}  line {n}: {lines[n - 1].strip()[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
