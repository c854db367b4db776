# Session 42, calls 4-5 (warm machine after call_ab.sh; the branch checked out): GPU tests (TEST_K,
# TESTS_S; TESTS_S=0 skips), then kernel_bench.py's table for HEADS × MIXES, QLA / FlashQLA / FLA each
# in its own process (--isolate), FlashQLA and FLA JIT-compiling in their processes (--no-prewarm).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
end=$(( t0 + ${CALL_S:-560} ))
if [ "${TESTS_S:-0}" -gt 0 ]; then
  QLA_ERR_LOG=$OUT/errs.jsonl timeout -k 5 $TESTS_S python3 -m pytest -m gpu -p no:cacheprovider -rA \
    ${TEST_K:+-k "$TEST_K"} tests/test_hopper_gpu.py > $OUT/tests.log 2>&1
  echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)"
  grep -E "^(FAILED|ERROR)" $OUT/tests.log | cut -c1-300
fi
timeout -k 5 $(( end - SECONDS - 5 )) python3 bench_serving/kernel_bench.py --heads "${HEADS:?}" ${MIXES:+--mixes "$MIXES"} \
  --isolate --no-prewarm --backends ${BACKENDS:-qla,flashqla,fla} --out $OUT/table \
  --budget-s $(( end - SECONDS - ${AGREE_S:-60} )) > $OUT/table.log 2>&1
echo "table rc=$? $((SECONDS - t0)) s"; grep -E "^\[bench\]|of [0-9]+" $OUT/table.log | cut -c1-220 | tail -n 40
finish
