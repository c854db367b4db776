# The whole GPU test file's kernels on the tree with kkt_solve's o_s clear removed (Z, in main since
# session 58), for call_tests.sh. The walks are session 53's (.gpu-p/tlc53t.tar.xz), so only the
# kkt_solve kernels compile here:
#   tar -xJf .gpu-p/tlc53t.tar.xz -C /tmp/tlc58
#   bash bench_serving/gpu_cache_subset.sh /tmp/tlc58 .gpu-p/tlc58t.tar.xz -- bash bench_serving/results/h200-session58/scripts/build_tests_kernels.sh
set -e
cd "$(dirname "$0")/../../../.."
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100
${PY:-.venv/bin/python} bench_serving/gpu_prebuild.py --processes 2 --heads 16/32,2/8
