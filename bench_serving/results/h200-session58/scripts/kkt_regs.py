"""ptxas -v for a kkt_solve.py copy at several MIN_BLOCKS (registers, spills), on the CPU machine:

    TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 .venv/bin/python bench_serving/results/h200-session58/scripts/kkt_regs.py \\
        kernels/hopper/kkt_solve.py 16/32 4,5,6
"""
import importlib.util, sys, os, tempfile, re
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 4))
sys.path.insert(0, os.path.join(ROOT, "bench_serving")); sys.path.insert(0, ROOT)
import tilelang
from sass_count import nvcc_cubin
path, heads = sys.argv[1], sys.argv[2]
mins = [int(x) for x in sys.argv[3].split(",")]
spec = importlib.util.spec_from_file_location("kx", path); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
H, HV = map(int, heads.split("/"))
for mb in mins:
    m.MIN_BLOCKS = mb
    f = m.build_kkt_solve(H, HV, 128, "bfloat16", False, (H*128, HV, HV))
    k = tilelang.compile(f, out_idx=None, pass_configs=m.PASS_CONFIGS)
    src = k.get_kernel_source()
    with tempfile.TemporaryDirectory() as tmp:
        _, done = nvcc_cubin(src, tmp, "-Xptxas", "-v", "-w", "--use_fast_math", check=True)
    info = [l for l in done.stderr.splitlines() if "registers" in l or "spill" in l]
    print(f"{os.path.basename(path)} {heads} MIN_BLOCKS={mb}:", " | ".join(x.strip() for x in info))
