# kkt_solve with two chunks a CTA (P2, ../kkt_solve_p2.py): T.Pipelined issues both chunks' K, g and
# β loads by cp.async up front and the second chunk's wait comes after the first's solve (session 58's
# ncu of main's kkt_solve had the prologue's loads at two-fifths of the stall samples). Its kernels,
# built on the CPU machine for call_kktp2.sh as build_kktz_kernels.sh does for Z:
#   bash bench_serving/gpu_cache_subset.sh /tmp/tlc58 .gpu-p/tlc58q.tar.xz -- bash bench_serving/results/h200-session58/scripts/build_kktp2_kernels.sh
set -e
cd "$(dirname "$0")/../../../.."
ROOT=$PWD
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100
mkdir -p .work/ab
cp bench_serving/results/h200-session58/kkt_solve_p2.py .work/ab/kkt_solve_p2.py
out=$(mktemp -d)
AB_BUILD_ONLY=1 AB_TEST_CONFIGS=0,3,5,6,7,18 AB_PROCESSES=2 AB_HEADS=16/64,16/32,2/8 \
  PYTHON=${PY:-$ROOT/.venv/bin/python} bash bench_serving/kernel_ab.sh $out P2=.work/ab/kkt_solve_p2.py
rm -rf $out
