#!/usr/bin/env bash
# Session 7, call 2 (same machine while warm; carry [".gpu", ".work/ab"]):
#   source .gpu/prelude.sh && bash .work/ab/next-call2.sh        (~560 s)
# 1. session 6's V-block rule: main at the plan's V-block (128 on 16/32 8192x4 and 2/8 16x512) vs forced 64
# 2. host time per call part, direct TVM-FFI launch (session 6) vs TileLang's wrapper
# 3. CP sweep at V-block 64, heads 16/32 and 2/8, with the short rows (1x4096, 1x2048) that decide
#    CPParams.min_seq_chunks; refit every constant afterwards (the walk changed)
# 4. counters on the walk, 16/32 8192x4 at V-block 128 and 64
set -uo pipefail
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
R=/tmp/res2; rm -rf $R; mkdir -p $R
T0=$SECONDS
pack() { cp $R/*.md $OUT/ 2>/dev/null; tar -C /tmp -czf $OUT/res2.tar.gz --exclude='site-*' res2; echo "packed at $((SECONDS-T0)) s"; }
trap pack EXIT
[ -f "$TILELANG_CACHE_DIR/.untarred" ] || { mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/ab/tlcache.tar.xz -C "$TILELANG_CACHE_DIR" && touch "$TILELANG_CACHE_DIR/.untarred"; }
python3 -m pip install -q --no-deps --no-build-isolation -e . > $R/pip.log 2>&1 || tail -3 $R/pip.log
AB_TESTS=0 AB_BLOCK_V="plan 64" AB_HEADS=16/32,2/8 AB_MIXES=8192x4,16x512,1x32768 AB_DEADLINE=140 \
  bash bench_serving/kernel_ab.sh $R/bv 2>&1 | tail -n 10
cp $R/bv/ab.md $R/ab-block-v-rule.md 2>/dev/null
for d in 1 0; do
  QLA_DIRECT_LAUNCH=$d timeout 45 python3 bench_serving/host_profile.py --heads 16/32,2/8 --mixes 1x8192,8192x4,16x512 \
    --out $R/host-direct$d.json > $R/host-direct$d.log 2>&1; echo "host profile direct=$d: $(tail -n 1 $R/host-direct$d.log)"
done
timeout 200 python3 bench_serving/kernels.py --cp-sweep --heads 16/32,2/8 --cp-block-v 64 --budget-s 185 \
  --out $R/cp-sweep > $R/cp-sweep.log 2>&1; tail -n 2 $R/cp-sweep.log
for bv in 128 64; do
  QLA_BLOCK_V=$bv timeout 60 bash bench_serving/ncu_walk.sh $R/ncu-bv$bv 16/32 8192x4 2>&1 | tail -n 25
done
