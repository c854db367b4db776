#!/bin/bash
# Session 19: seed from session 18's cache (/work/tlcache19 = copy of tlcache18); check the vLLM
# adapter's and the tests' variants are cached, then build every bench head config's kernels with the
# CP tail-start forms (QLA_CP_TAIL=1: the scan kernel and the combine's tail form) and without.
source .venv/bin/activate
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 TILELANG_CACHE_DIR=/work/tlcache19
t0=$SECONDS
python -m qla_serve.cli warmup --heads 16/32 --engine vllm --compile-only --processes 2 > .work/s19/build-warmup.log 2>&1
echo "warmup rc=$? $((SECONDS-t0)) s" >> .work/s19/build.log
QLA_CP_TAIL=1 python bench_serving/gpu_prebuild.py --processes 2 --heads 16/32,2/8,4/16,8/32 > .work/s19/build-prebuild-tail.log 2>&1
echo "prebuild tail rc=$? $((SECONDS-t0)) s" >> .work/s19/build.log
python bench_serving/gpu_prebuild.py --processes 2 > .work/s19/build-prebuild.log 2>&1
echo "prebuild rc=$? $((SECONDS-t0)) s" >> .work/s19/build.log
echo done >> .work/s19/build.log
