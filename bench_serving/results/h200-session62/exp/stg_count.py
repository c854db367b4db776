"""Global-store opcodes (with their widths) and ptxas's register/spill line of one persistent-walk
variant, compiled for sm_90a on a machine without a GPU (session 62's state-store check):

    NVDISASM=.../triton/backends/nvidia/bin/nvdisasm TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 \
      python stg_count.py LABEL FUSED_FWD_FILE|- POOL_DTYPE BLOCK_V     # "-": the checkout's fused_fwd.py

One variant a process: the hopper package keeps built kernels by key, so a second variant in the same
process would be answered from the first's."""
import sys, subprocess, tempfile, collections, re, os
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
sys.path.insert(0, os.path.join(ROOT, 'bench_serving')); sys.path.insert(0, ROOT)
import sass_count
class A: pass
label, ff, pool = sys.argv[1], (sys.argv[2] if sys.argv[2] != "-" else None), sys.argv[3]
a = A(); a.fused_fwd = ff; a.kkt_solve = None; a.heads = "16/32"; a.pool_dtype = pool; a.layout = "vk"
a.block_v = int(sys.argv[4]); a.kernel = "fwd"; a.phase = 0
src = sass_count.kernel_source(a)
with tempfile.TemporaryDirectory() as tmp:
    cubin, done = sass_count.nvcc_cubin(src, tmp, "-w", "-Xptxas", "-v")
    regs = [l.strip() for l in done.stderr.splitlines() if "registers" in l or "spill" in l]
    sass = subprocess.run([sass_count.find_nvdisasm(), "-c", cubin], check=True, capture_output=True, text=True).stdout
c = collections.Counter(m.group(1) for m in re.finditer(r"\b(STG\.[A-Z0-9.]+)", sass))
print(label, pool, a.block_v, dict(c), regs[-2:], "C7512" in done.stderr)
