# Session 36, call B: the checkout with X-hi kept (kernels/hopper/kkt_solve.py).
# 1. the whole GPU test file in one process (the fp64 oracle runs on the GPU);
# 2. beside it, on the other cores: QLA's kernels for the table's other heads (HEADS_B) and
#    FlashQLA's JIT for all six heads, so that call C's table only loads (the new cache entries come
#    back as tlc-b.tar.xz, for a later machine).
# Carry: .gpu-p/tlc34.tar.xz; .gpu/tlc35ab.tar.xz, .gpu/tlc36.tar.xz copied to .gpu-p/ first.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
stamp=$OUT/.stamp; touch $stamp
timeout -k 5 ${BUILD_S:-300} python3 bench_serving/gpu_prebuild.py --processes 8 --no-tests \
  --heads "${HEADS_B:-16/64,2/8,4/16,16/48}" > $OUT/prebuild-b.log 2>&1 &
timeout -k 5 ${BUILD_S:-300} python3 - > $OUT/prewarm.log 2>&1 <<'PY' &
import sys
sys.path.insert(0, "bench_serving")
import kernel_bench
heads = [(16, 32), (8, 32), (16, 64), (2, 8), (4, 16), (16, 48)]
print("FlashQLA prewarm s", kernel_bench.prewarm(heads, list(kernel_bench.SEQLENS), timeout_s=280, jobs=6))
PY
QLA_ERR_LOG=$OUT/errs.jsonl timeout -k 5 ${TESTS_S:-380} python3 -m pytest -m gpu -p no:cacheprovider -rA \
  ${TEST_K:+-k "$TEST_K"} tests/test_hopper_gpu.py > $OUT/tests.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)"
grep -E "^(FAILED|ERROR)" $OUT/tests.log | cut -c1-200
wait
echo "builds done $((SECONDS - t0)) s: $(tail -n 1 $OUT/prebuild-b.log) / $(tail -n 1 $OUT/prewarm.log)"
(cd $TILELANG_CACHE_DIR && find 0.1.15/linux-x86_64/kernels -mindepth 1 -maxdepth 1 -newer $stamp \
  | tar -cJf $OUT/tlc-b.tar.xz -T -) && echo "tlc-b: $(tar -tJf $OUT/tlc-b.tar.xz | grep -c '/$') entries"
finish
