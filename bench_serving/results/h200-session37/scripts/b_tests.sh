# Session 37, call B: the whole GPU test file with shared device tables in the checkout, one process
# (graph replay and CP cases read the shared tables). New cache entries come back as tlc-b.tar.xz.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
stamp=$OUT/.stamp; touch $stamp
QLA_ERR_LOG=$OUT/errs.jsonl timeout -k 5 ${TESTS_S:-420} python3 -m pytest -m gpu -p no:cacheprovider -rA \
  ${TEST_K:+-k "$TEST_K"} tests/test_hopper_gpu.py > $OUT/tests.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)"
grep -E "^(FAILED|ERROR)" $OUT/tests.log | cut -c1-200
(cd $TILELANG_CACHE_DIR && find 0.1.15/linux-x86_64/kernels -mindepth 1 -maxdepth 1 -newer $stamp \
  | tar -cJf $OUT/tlc-b.tar.xz -T -) && echo "tlc-b: $(tar -tJf $OUT/tlc-b.tar.xz | grep -c '/$') entries"
finish
