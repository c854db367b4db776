#!/usr/bin/env bash
# Session 7, call 1 (nvidia-h200, carry [".gpu", ".work/ab"]), main checked out:
#   source .gpu/prelude.sh && bash .work/ab/next-call1.sh        (~520 s)
# 1. GPU tests on main: the RS walk, merged in session 6 and edited there (WG_P's decay mask on
#    registers, the consumer's decay read from eg_s, kkt_solve's L loop: bit-identical by construction)
# 2. same-run A/B at the plan's V-block: main vs premask (the walk session 5 timed) and vs prekkt
#    (session 5's kkt_solve)
set -uo pipefail
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
R=/tmp/res1; rm -rf $R; mkdir -p $R
T0=$SECONDS
pack() { cp $R/*.md $OUT/ 2>/dev/null; tar -C /tmp -czf $OUT/res1.tar.gz --exclude='site-*' res1; echo "packed at $((SECONDS-T0)) s"; }
trap pack EXIT
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/ab/tlcache.tar.xz -C "$TILELANG_CACHE_DIR" && touch "$TILELANG_CACHE_DIR/.untarred"
python3 -m pip install -q --no-deps --no-build-isolation -e . > $R/pip.log 2>&1 || tail -3 $R/pip.log
timeout 120 python3 -m pytest -m gpu -s -p no:cacheprovider -rA -x -k "gva2-bf16-kv-g3-bv64 or single-tokens" \
  tests/test_hopper_gpu.py > $R/smoke.log 2>&1 || { echo "smoke failed: $(tail -n 1 $R/smoke.log)"; exit 0; }
echo "smoke ok at $((SECONDS-T0)) s"
QLA_ERR_LOG=$R/errors.jsonl timeout 250 python3 -m pytest -m gpu -s -p no:cacheprovider -rA --durations=0 \
  tests/test_hopper_gpu.py > $R/tests.log 2>&1; echo "tests: $(tail -n 1 $R/tests.log) at $((SECONDS-T0)) s"
AB_TESTS=0 AB_BLOCK_V=plan AB_HEADS=16/32,2/8 AB_MIXES=8192x4,16x512,1x32768 AB_DEADLINE=$((520 - (SECONDS - T0))) \
  bash bench_serving/kernel_ab.sh $R/ab premask=.work/ab/premask.py prekkt=.work/ab/kkt_solve_prekkt.py 2>&1 | tail -n 10
cp $R/ab/ab.md $R/ab-session6-edits.md 2>/dev/null
