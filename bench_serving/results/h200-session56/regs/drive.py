"""Build one fused_fwd variant, compile with -Xptxas -v, report regs/spills/C7512 and per-region STL/LDL."""
import sys, os, collections, subprocess, tempfile, time, re
sys.path.insert(0, "/tmp/wt-regs/bench_serving")
import sass_count as sc
tag, path = sys.argv[1], sys.argv[2]
os.environ.setdefault("TILELANG_DEFAULT_TARGET", "nvidia/nvidia-h100")
t0 = time.time()
args = sc.argparse.Namespace(heads="16/32", block_v=int(os.environ.get("BV", "128")), phase=int(os.environ.get("PHASE", "0")), kernel="fwd", pool_dtype=os.environ.get("POOL", "float32"),
                             layout="vk", fused_fwd=path, kkt_solve=None)
src = sc.kernel_source(args)
t1 = time.time()
open(f"/tmp/regs_runs/{tag}.cu", "w").write(src)
fm = sc.fast_math("fwd")
with tempfile.TemporaryDirectory() as tmp:
    cubin, done = sc.nvcc_cubin(src, tmp, "-lineinfo", "-Xptxas", "-v", *(["--use_fast_math"] if fm else []), check=False)
    open(f"/tmp/regs_runs/{tag}.ptxas.txt", "w").write(done.stderr)
    if done.returncode:
        print(done.stderr[-3000:]); sys.exit(1)
    import shutil; shutil.copy(cubin, f"/tmp/regs_runs/{tag}.cubin")
    sass = subprocess.run([sc.find_nvdisasm(), "-g", "-c", cubin], check=True, capture_output=True, text=True).stdout
    open(f"/tmp/regs_runs/{tag}.sass", "w").write(sass)
t2 = time.time()
per_line = sc.parse(sass); lines = src.split("\n"); whole = sc.totals(sass)
print(f"== {tag}: tilelang {t1-t0:.0f}s nvcc {t2-t1:.0f}s")
for l in done.stderr.splitlines():
    if ("ptxas" in l or "C75" in l or "spill" in l) and "info    : Compil" not in l:
        print("  ptxas:", l.strip()[:300])
print("  total STL/LDL:", whole.get("STL", 0), whole.get("LDL", 0), "HGMMA", whole.get("HGMMA", 0))
for name, a, b in sc.regions(lines, "fwd"):
    ops = collections.Counter()
    for n in range(a, b + 1):
        ops.update(per_line.get(n, {}))
    print(f"  {name:10s} lines {a}-{b}: {sum(ops.values())} instr; {sc.spill_summary(ops)}")
