#!/bin/bash
# Session 19, after build_local.sh: the vLLM adapter's variants for both served shapes (16/32, the
# TP-8 rank's 2/8) with the CP tail-start forms too, so a server with tail starts on loads them.
source .venv/bin/activate
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 TILELANG_CACHE_DIR=/work/tlcache19
while ! grep -q done .work/s19/build.log; do sleep 5; done
t0=$SECONDS
for tail in 0 1; do
  QLA_CP_TAIL=$tail python -m qla_serve.cli warmup --heads 16/32,2/8 --engine vllm --compile-only --processes 2 \
    > .work/s19/build-warmup-tail$tail.log 2>&1
  echo "warmup tail=$tail rc=$? $((SECONDS-t0)) s" >> .work/s19/build2.log
done
echo done >> .work/s19/build2.log
