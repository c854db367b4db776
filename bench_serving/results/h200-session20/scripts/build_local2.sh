#!/bin/bash
source .venv/bin/activate
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 TILELANG_CACHE_DIR=/work/tlcache20
while ! grep -q done .work/s20/build.log; do sleep 5; done
t0=$SECONDS
for h in 16/32 2/8; do
  python -m qla_serve.cli warmup --heads $h --engine vllm --compile-only --processes 2 > .work/s20/build-warmup-${h/\//-}.log 2>&1
  echo "warmup $h rc=$? $((SECONDS-t0)) s" >> .work/s20/build2.log
done
echo done >> .work/s20/build2.log
