"""ptxas's view of one walk variant built for sm_90a: registers, spill bytes (the whole kernel: the
IO warps' few are main's too) and the wgmma warnings (C7512: serialised for want of registers) that
bench_serving/sass_count.py's -w hides. sass_count.py says which warp role a spill is in.

    QLA_O_WG=m python ptxas_check.py HEADS BV POOL_DTYPE PHASE [LAYOUT [PERSISTENT 0|1|- [L2NORM 0|1]]]
    e.g. QLA_O_WG=1 python ptxas_check.py 16/32 128 float32 3
"""
import os, re, subprocess, sys, tempfile
os.environ.setdefault("TILELANG_DEFAULT_TARGET", "nvidia/nvidia-h100")
from qla_serve.kernels import hopper
sys.path.insert(0, "bench_serving")
import sass_count
heads, bv, pdt, phase = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
lay = sys.argv[5] if len(sys.argv) > 5 else "vk"
pers = None if len(sys.argv) <= 6 or sys.argv[6] == "-" else sys.argv[6] == "1"
l2 = len(sys.argv) > 7 and sys.argv[7] == "1"     # q/k l2norm inside the walk (QLA_L2NORM=kernel's form)
H, HV = (int(x) for x in heads.split("/"))
var = hopper.Variant(H, HV, pool_dtype=pdt, state_layout=lay, block_v=bv, use_qk_l2norm=l2)
src = hopper.fwd_kernel(var, phase=phase, persistent=pers).get_kernel_source()
with tempfile.TemporaryDirectory() as tmp:
    _, r = sass_count.nvcc_cubin(src, tmp, "-Xptxas", "-v", check=False)
msgs = [l for l in r.stderr.splitlines() if re.search(r"C75\d\d|spill|Used \d+ registers|smem", l)]
print(f"{heads} bv{bv} {pdt} {lay} phase{phase} pers={pers} l2={int(l2)} o_wg={os.environ.get('QLA_O_WG','0')} rc={r.returncode}")
for l in msgs:
    print("   ", l.strip()[:220])
if r.returncode:
    print(r.stderr[-3000:])
