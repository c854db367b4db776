#!/usr/bin/env bash
# Session 7, call 3 (same machine while warm; carry [".gpu", ".work/ab"]):
#   source .gpu/prelude.sh && bash .work/ab/next-call3.sh        (~560 s)
# 1. timing by difference on the new walk: fastp / fast (fast math, real candidates: if one wins, its
#    GPU tests next) and the stage-less copies (nowp answers whether WG_P limits the chunk step)
# 2. the issue-3 table, heads 16/32 and 2/8, QLA vs FLA vs FlashQLA (FlashInfer only with .gpu-vllm)
set -uo pipefail
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
R=/tmp/res3; rm -rf $R; mkdir -p $R
T0=$SECONDS
pack() { cp $R/*.md $R/kernels/*.md $OUT/ 2>/dev/null; tar -C /tmp -czf $OUT/res3.tar.gz --exclude='site-*' res3; echo "packed at $((SECONDS-T0)) s"; }
trap pack EXIT
[ -f "$TILELANG_CACHE_DIR/.untarred" ] || { mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/ab/tlcache.tar.xz -C "$TILELANG_CACHE_DIR" && touch "$TILELANG_CACHE_DIR/.untarred"; }
python3 -m pip install -q --no-deps --no-build-isolation -e . > $R/pip.log 2>&1 || tail -3 $R/pip.log
AB_TESTS=0 AB_BLOCK_V=plan AB_HEADS=16/32 AB_MIXES=8192x4,1x32768 AB_DEADLINE=250 \
  bash bench_serving/kernel_ab.sh $R/abl fastp=.work/ab/abl/fastp.py nowp=.work/ab/abl/nowp.py \
  fast=.work/ab/abl/fast.py noupdate=.work/ab/abl/noupdate.py noostore=.work/ab/abl/noostore.py \
  noout=.work/ab/abl/noout.py 2>&1 | tail -n 14
cp $R/abl/ab.md $R/ablations.md 2>/dev/null
timeout $((545 - (SECONDS - T0))) python3 bench_serving/kernels.py --heads 16/32,2/8 --budget-s $((520 - (SECONDS - T0))) \
  --out $R/kernels > $R/kernels.log 2>&1
tail -n 8 $R/kernels.log
