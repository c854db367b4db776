#!/usr/bin/env bash
# Session 7, call 4 (fresh nvidia-h200; carry [".gpu", ".work/ab"]):
#   source .gpu/prelude.sh && bash .work/ab/next-call4.sh          (≤ 570 s)
# 1. GPU tests of the CP path and a plain case (the host tables now come through one staged copy)
# 2. launch probe (where a TileLang launch's host time goes) + host profile
# 3. every row at forced V-block 64 and 128 (QLA only): data for choose_block_v / CHUNK_STEP_US
# 4. the issue-3 table (QLA vs FLA vs FlashQLA) with the refitted CP rule and the staged tables
set -uo pipefail
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
R=/tmp/res4; rm -rf $R; mkdir -p $R
T0=$SECONDS
pack() { cp $R/*.md $OUT/ 2>/dev/null; tar -C /tmp -czf $OUT/res4.tar.gz --exclude='site-*' res4; echo "packed at $((SECONDS-T0)) s"; }
trap pack EXIT
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/ab/tlcache.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > $R/pip.log 2>&1 || tail -3 $R/pip.log
QLA_ERR_LOG=$R/errors.jsonl timeout 150 python3 -m pytest -m gpu -s -p no:cacheprovider -rA --durations=0 \
  -k "cp_ or cuda_graph or gva2-bf16-kv-g3-bv64 or single-tokens" tests/test_hopper_gpu.py > $R/tests.log 2>&1
echo "tests: $(tail -n 1 $R/tests.log) at $((SECONDS-T0)) s"; pack
timeout 60 python3 .work/ab/launch_probe.py > $R/launch_probe.log 2>&1; head -n 4 $R/launch_probe.log | cut -c1-600
QLA_DIRECT_LAUNCH=1 timeout 40 python3 bench_serving/host_profile.py --heads 16/32,2/8 --mixes 1x8192,8192x4,16x512 \
  --out $R/host-profile.json > $R/host-profile.log 2>&1; cat $R/host-profile.log | tail -n 6; pack
for bv in 64 128; do
  QLA_BLOCK_V=$bv timeout 100 python3 bench_serving/kernels.py --backends qla --no-prewarm --heads 16/32,2/8 \
    --budget-s 75 --out $R/bv$bv > $R/bv$bv.log 2>&1; echo "bv$bv: $(grep -c '^| ' $R/bv$bv/kernels.md) table lines at $((SECONDS-T0)) s"
done; pack
left=$((560 - (SECONDS - T0)))
timeout $((left - 10)) python3 bench_serving/kernels.py --heads 16/32,2/8 --budget-s $((left - 60)) \
  --out $R/kernels > $R/kernels.log 2>&1
tail -n 8 $R/kernels.log
