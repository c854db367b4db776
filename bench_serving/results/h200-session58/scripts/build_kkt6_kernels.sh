# kkt_solve at 6 CTAs per SM (MIN_BLOCKS = 6: ptxas caps it at 80 registers, no spills at 16/32,
# 16/64, 2/8; 52 bytes at 16/48) as a whole kkt_solve.py (.work/ab/kkt_solve_m6.py) and its kernels,
# built on the CPU machine for call_kkt6.sh by kernel_ab.sh's build-only mode: the quick GPU tests'
# variants (common.sh's QUICK_CONFIGS) and the bench's 16/64, 16/32, 2/8. Only kkt_solve differs
# from main, so the walks come from main's cache entries:
#   mkdir -p /tmp/tlc58 && tar -xJf .gpu-p/tlc54.tar.xz -C /tmp/tlc58 && cp -rn ~/.tilelang/cache/0.1.15 /tmp/tlc58/
#   bash bench_serving/gpu_cache_subset.sh /tmp/tlc58 .gpu-p/tlc58.tar.xz -- bash bench_serving/results/h200-session58/scripts/build_kkt6_kernels.sh
set -e
cd "$(dirname "$0")/../../../.."
ROOT=$PWD
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100
mkdir -p .work/ab
sed 's/^MIN_BLOCKS = 4 /MIN_BLOCKS = 6 /' kernels/hopper/kkt_solve.py > .work/ab/kkt_solve_m6.py
grep -q '^MIN_BLOCKS = 6 ' .work/ab/kkt_solve_m6.py
out=$(mktemp -d)
AB_BUILD_ONLY=1 AB_TEST_CONFIGS=0,3,5,6,7,18 AB_PROCESSES=2 AB_HEADS=16/64,16/32,2/8 \
  PYTHON=${PY:-$ROOT/.venv/bin/python} bash bench_serving/kernel_ab.sh $out M6=.work/ab/kkt_solve_m6.py
rm -rf $out
