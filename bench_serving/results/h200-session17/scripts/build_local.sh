#!/bin/bash
# Build the kernels the lease needs on the CPU machine (sm_90a, nvcc only) into /work/tlcache17,
# from nothing in session 17: the vLLM adapter's variants for 16/32 first (the check and the
# matrix), then the GPU tests' variants (gpu_prebuild.py; its 2/8 bench variants partly built).
source .venv/bin/activate
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 TILELANG_CACHE_DIR=/work/tlcache17
t0=$SECONDS
python -m qla_serve.cli warmup --heads 16/32 --engine vllm --compile-only --processes 2 > .work/s17/build-warmup.log 2>&1
echo "warmup conv=vllm rc=$? $((SECONDS-t0)) s" >> .work/s17/build.log
python bench_serving/gpu_prebuild.py --processes 2 --heads 16/32 > .work/s17/build-prebuild2.log 2>&1
echo "prebuild rc=$? $((SECONDS-t0)) s" >> .work/s17/build.log
echo done >> .work/s17/build.log
