# The kernels issue 3's six-head table looks up (session 53's call_table.sh), built on the CPU
# machine into TileLang's cache:
#   bash bench_serving/gpu_cache_subset.sh CACHE .gpu-p/tlc54.tar.xz -- bash bench_serving/results/h200-session54/scripts/build_table_kernels.sh
set -e
cd "$(dirname "$0")/../../../.."
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100
${PY:-.venv/bin/python} bench_serving/gpu_prebuild.py --processes 2 --heads 16/64,16/32,16/48,8/32,4/16,2/8 --no-tests
