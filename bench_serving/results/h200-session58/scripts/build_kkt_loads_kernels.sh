# Two kkt_solve candidates against the prologue's load latency (session 58's ncu of main's kkt_solve
# had those loads at two-fifths of the stall samples), built on the CPU machine for call_kkt_loads.sh
# as build_kktz_kernels.sh does for Z:
# - P2 (../kkt_solve_p2.py): two chunks a CTA, T.Pipelined issuing both chunks' K, g and β loads by
#   cp.async up front, the second chunk's wait after the first's solve (68 KB of shared memory);
# - L2P (../kkt_solve_l2p.py): main's kernel, each CTA first issuing prefetch.global.L2 for the K,
#   g and β rows of the CTA 4 × 132 places after it in launch order.
#   bash bench_serving/gpu_cache_subset.sh /tmp/tlc58 .gpu-p/tlc58q.tar.xz -- bash bench_serving/results/h200-session58/scripts/build_kkt_loads_kernels.sh
set -e
cd "$(dirname "$0")/../../../.."
ROOT=$PWD
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100
mkdir -p .work/ab
cp bench_serving/results/h200-session58/kkt_solve_p2.py bench_serving/results/h200-session58/kkt_solve_l2p.py .work/ab/
out=$(mktemp -d)
AB_BUILD_ONLY=1 AB_TEST_CONFIGS=0,3,5,6,7,18 AB_PROCESSES=2 AB_HEADS=16/64,16/32,2/8 \
  PYTHON=${PY:-$ROOT/.venv/bin/python} bash bench_serving/kernel_ab.sh $out P2=.work/ab/kkt_solve_p2.py L2P=.work/ab/kkt_solve_l2p.py
rm -rf $out
