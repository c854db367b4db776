#!/bin/bash
# Session 20: seeded from session 19's cache (/work/tlcache20 = copy of tlcache19); check that every
# variant the lease needs is cached (engine variants for 16/32 and 2/8, both CP forms; bench kernels).
source .venv/bin/activate
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 TILELANG_CACHE_DIR=/work/tlcache20
t0=$SECONDS
python -m qla_serve.cli warmup --heads 16/32,2/8 --engine vllm --compile-only --processes 2 > .work/s20/build-warmup.log 2>&1
echo "warmup rc=$? $((SECONDS-t0)) s" >> .work/s20/build.log
QLA_CP_TAIL=1 python bench_serving/gpu_prebuild.py --processes 2 --heads 16/32,2/8,4/16,8/32 > .work/s20/build-prebuild-tail.log 2>&1
echo "prebuild tail rc=$? $((SECONDS-t0)) s" >> .work/s20/build.log
python bench_serving/gpu_prebuild.py --processes 2 > .work/s20/build-prebuild.log 2>&1
echo "prebuild rc=$? $((SECONDS-t0)) s" >> .work/s20/build.log
echo done >> .work/s20/build.log
