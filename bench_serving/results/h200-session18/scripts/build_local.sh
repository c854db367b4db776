#!/bin/bash
# Session 18: seed from session 17's cache; check every vLLM/test variant is cached, then build the
# CP tail-start variants (QLA_CP_TAIL=1) beside them.
source .venv/bin/activate
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 TILELANG_CACHE_DIR=/work/tlcache18
t0=$SECONDS
python -m qla_serve.cli warmup --heads 16/32 --engine vllm --compile-only --processes 2 > .work/s18/build-warmup.log 2>&1
echo "warmup rc=$? $((SECONDS-t0)) s" >> .work/s18/build.log
python bench_serving/gpu_prebuild.py --processes 2 --heads 16/32 > .work/s18/build-prebuild.log 2>&1
echo "prebuild rc=$? $((SECONDS-t0)) s" >> .work/s18/build.log
QLA_CP_TAIL=1 python bench_serving/gpu_prebuild.py --processes 2 --heads 16/32 > .work/s18/build-prebuild-tail.log 2>&1
echo "prebuild tail rc=$? $((SECONDS-t0)) s" >> .work/s18/build.log
echo done >> .work/s18/build.log
