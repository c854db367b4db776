#!/bin/bash
# Build every kernel the lease needs on the CPU machine (sm_90a, nvcc only) into /work/tlcache16
# (seeded from session 15's cache: unchanged kernels are hits).
source .venv/bin/activate
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 TILELANG_CACHE_DIR=/work/tlcache16
t0=$SECONDS
python bench_serving/gpu_prebuild.py --processes 2 --heads 16/32,2/8 > .work/s16/build-prebuild.log 2>&1
echo "prebuild rc=$? $((SECONDS-t0)) s" >> .work/s16/build.log
python -m qla_serve.cli warmup --heads 16/32 --heads 2/8 --engine vllm --compile-only --processes 2 > .work/s16/build-warmup.log 2>&1
echo "warmup conv=vllm rc=$? $((SECONDS-t0)) s" >> .work/s16/build.log
QLA_VLLM_CONV=qla python -m qla_serve.cli warmup --heads 16/32 --heads 2/8 --engine vllm --compile-only --processes 2 >> .work/s16/build-warmup.log 2>&1
echo "warmup conv=qla rc=$? $((SECONDS-t0)) s" >> .work/s16/build.log
echo done >> .work/s16/build.log
