"""The order of the walk's HGMMA, STSM, WARPGROUP.* and SYNCS (mbarrier) instructions in its SASS,
runs of one opcode collapsed: with QLA_O_WG=2 the consumers' hand-off STSMs should sit between a
product's HGMMAs and its WARPGROUP.DEPBAR (stored under the product).

    NVDISASM=… TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 QLA_O_WG=2 python owg_sass_order.py BV PHASE
(run from the repository root; 16/32 heads, fp32 pool; nvdisasm as for bench_serving/sass_count.py)
"""
import os, re, subprocess, sys, tempfile
sys.path.insert(0, "bench_serving")
import sass_count
from qla_serve.kernels import hopper
bv, phase = int(sys.argv[1]), int(sys.argv[2])
var = hopper.Variant(16, 32, pool_dtype="float32", block_v=bv)
src = hopper.fwd_kernel(var, phase=phase).get_kernel_source()
with tempfile.TemporaryDirectory() as tmp:
    cub, _ = sass_count.nvcc_cubin(src, tmp, "-lineinfo", "-w")
    sass = subprocess.run([sass_count.find_nvdisasm(), "-c", cub], check=True, capture_output=True, text=True).stdout
seq = []
for l in sass.splitlines():
    m = re.match(r"^\s+/\*([0-9a-f]+)\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", l)
    if m and re.match(r"HGMMA|STSM|WARPGROUP|SYNCS|SETMAXREG|USETMAXREG", m.group(2)):
        op = m.group(2)
        seq.append(op.split(".")[0] if op.startswith("HGMMA") else op)
out, prev, n = [], None, 0
for op in seq:
    if op == prev:
        n += 1
    else:
        if prev: out.append(f"{prev}×{n}" if n > 1 else prev)
        prev, n = op, 1
out.append(f"{prev}×{n}" if n > 1 else prev)
print(" ".join(out))
