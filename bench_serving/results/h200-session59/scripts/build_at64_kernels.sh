# The kernels call_at64.sh looks up, built on the CPU machine into TileLang's cache (CACHE seeded from
# .gpu-p/tlc59l.tar.xz, whose walks are main's):
#   bash bench_serving/gpu_cache_subset.sh CACHE .gpu-p/tlc59a.tar.xz -- bash bench_serving/results/h200-session59/scripts/build_at64_kernels.sh
# The tree's quick GPU tests, GVA-3 case and chunks-at-64c cases (gpu_prebuild's TEST_CONFIGS 0,3,5,6,7,18,19),
# and both labels' bench kernels at 16/64, 16/32 and 2/8 (kernel_ab's accuracy line). Writes
# .work/ab/kkt_solve_tab.py from the tree's kkt_solve.py first.
set -e
cd "$(dirname "$0")/../../../.."
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100
mkdir -p .work/ab
python3 - <<'PY'
s = open("kernels/hopper/kkt_solve.py").read()
fast = """            if chunks_at_64c != 0:
                bounds[0] = bc * C
                bounds[1] = NT
            else:
                bounds[0] = chunk_bounds[bc, 0]
                bounds[1] = chunk_bounds[bc, 1]
"""
table = """            # A/B label TAB (session 59): the table read always, as before chunks_at_64c
            bounds[0] = chunk_bounds[bc, 0]
            bounds[1] = chunk_bounds[bc, 1]
"""
assert s.count(fast) == 1
open(".work/ab/kkt_solve_tab.py", "w").write(s.replace(fast, table))
PY
PY=${PY:-.venv/bin/python}
$PY bench_serving/gpu_prebuild.py --test-configs 0,3,5,6,7,18,19 --heads 2/8 --block-v 64,128 --processes 2
out=$(mktemp -d)
AB_BUILD_ONLY=1 AB_TESTS=0 AB_PROCESSES=2 AB_HEADS=16/64,16/32,2/8 PYTHON=$PWD/$PY \
  bash bench_serving/kernel_ab.sh $out TAB=.work/ab/kkt_solve_tab.py
rm -rf $out
