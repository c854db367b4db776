# kkt_solve without its o_s clear (Z, .work/ab/kkt_solve_z.py; session 58's ncu of main's kkt_solve
# put 256 of a CTA's ~2430 shared-memory wavefronts on that clear: 16 per 16-byte store) and its
# kernels, built on the CPU machine for call_kktz.sh as build_kkt6_kernels.sh does for M6:
#   cp kernels/hopper/kkt_solve.py .work/ab/kkt_solve_z.py  (then the two edits: no T.clear(o_s), the
#   partial chunk's store masked to the lower blocks; the file is committed beside this script)
#   bash bench_serving/gpu_cache_subset.sh /tmp/tlc58 .gpu-p/tlc58z.tar.xz -- bash bench_serving/results/h200-session58/scripts/build_kktz_kernels.sh
set -e
cd "$(dirname "$0")/../../../.."
ROOT=$PWD
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100
mkdir -p .work/ab
cp bench_serving/results/h200-session58/kkt_solve_z.py .work/ab/kkt_solve_z.py
out=$(mktemp -d)
AB_BUILD_ONLY=1 AB_TEST_CONFIGS=0,3,5,6,7,18 AB_PROCESSES=2 AB_HEADS=16/64,16/32,2/8 \
  PYTHON=${PY:-$ROOT/.venv/bin/python} bash bench_serving/kernel_ab.sh $out Z=.work/ab/kkt_solve_z.py
rm -rf $out
