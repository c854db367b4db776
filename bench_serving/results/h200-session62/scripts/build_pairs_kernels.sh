# The kernels an A/B of exp/state-store-pairs.patch looks up beyond main's (the patched walk's: the
# persistent forms differ, the rest is main's source and cache key), built on the CPU machine into
# TileLang's cache, CACHE seeded with main's (session 61's ~/.cache/qla-tlc or the tlc59t/tlc61b tars):
#   bash bench_serving/gpu_cache_subset.sh CACHE .gpu-p/tlc62p.tar.xz -- bash bench_serving/results/h200-session62/scripts/build_pairs_kernels.sh
# The quick GPU tests' configs (gpu_prebuild's TEST_CONFIGS 0,3,5,6,7,18) and the bench kernels at
# 16/32, 16/64, 2/8 at both V-blocks, for label PAIRS (.work/ab/fused_fwd_pairs.py, written here
# from main's fused_fwd.py and the patch). Carry .work/ab with the tar.
set -e
cd "$(dirname "$0")/../../../.."
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100
mkdir -p .work/ab
cp kernels/hopper/fused_fwd.py .work/ab/fused_fwd_pairs.py
patch -s .work/ab/fused_fwd_pairs.py bench_serving/results/h200-session62/exp/state-store-pairs.patch
PY=${PY:-.venv/bin/python}
out=$(mktemp -d)
AB_BUILD_ONLY=1 AB_TESTS=1 AB_TEST_CONFIGS=0,3,5,6,7,18 AB_SKIP_TREE=1 AB_PROCESSES=2 AB_HEADS=16/32,16/64,2/8 \
  AB_BLOCK_V="64 128" PYTHON=$PWD/$PY bash bench_serving/kernel_ab.sh $out PAIRS=.work/ab/fused_fwd_pairs.py
rm -rf $out
