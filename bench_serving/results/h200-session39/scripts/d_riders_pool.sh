# Session 39, call D (branch exp/cp-riders-from-pool): phase 3 starts sequences left whole from the
# pool and the combine skips them. The CP GPU tests and the combine kernel's test first (NaN-poisoned
# CP buffer), then the rider sweep again (compare b-riders/, the start copies) with two pure-CP rows
# (compare a-cp-short/ and the table) to see phase 3's own speed. New kernels travel as tlc39.tar.xz.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
QLA_ERR_LOG=$OUT/errs.jsonl timeout -k 5 ${TESTS_S:-120} python3 -m pytest -m gpu -p no:cacheprovider -rA \
  -k "cp" tests/test_hopper_gpu.py > $OUT/tests.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)"
grep -E "^(FAILED|ERROR)" $OUT/tests.log | cut -c1-200
timeout -k 5 ${SWEEP_S:-130} python3 bench_serving/kernel_bench.py --cp-sweep \
  --heads ${HEADS:-2/8,4/16,16/32,16/64} --mixes "256*1+4096,8192+256*1,8192+13*1,16384+64*1,32768,4096" \
  --cp-parts 1,2,4,8 --out $OUT/riders --budget-s $(( ${SWEEP_S:-130} - 15 )) > $OUT/riders.log 2>&1
echo "riders rc=$? $((SECONDS - t0)) s"; grep -E "^\[cp-sweep\]" $OUT/riders.log | sed 's/parts=\[[0-9, ]*\]//' | cut -c1-100 | tail -n 100
finish
