# Session 26: sourced by every call script. Unpacks the kernel cache carried in THIS call (session
# 25: a cache unpacked by an earlier call was gone in the next) and installs the checkout.
source .gpu/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
mkdir -p "$TILELANG_CACHE_DIR"
for f in .gpu-p/tlc*.tar.xz; do
  [ -f "$f" ] && tar -xJf "$f" -C "$TILELANG_CACHE_DIR" && echo "unpacked $f"
done
echo "cached kernels: $(ls $TILELANG_CACHE_DIR/0.1.15/linux-x86_64/kernels 2>/dev/null | wc -l)"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
STAMP=$OUT/.stamp; touch $STAMP   # kernels newer than this were compiled in this call
gpu_tests() {   # the GPU test file on the tree, one process: $1 s unless TESTS_S says (0 skips); TEST_K selects;
  local s=${TESTS_S:-$1} log=${TESTS_LOG:-tests}    # TESTS_LOG names its log and error record (default tests, errs)
  [ "$s" -gt 0 ] || return 2                        # status: 0 all selected tests passed, 1 not, 2 not run
  QLA_ERR_LOG=$OUT/${TESTS_LOG:-errs}.jsonl timeout -k 5 $s python3 -m pytest -m gpu -p no:cacheprovider -rA \
    ${TEST_K:+-k "$TEST_K"} tests/test_hopper_gpu.py > $OUT/$log.log 2>&1
  local rc=$? last; last=$(tail -n 1 $OUT/$log.log)
  echo "$log rc=$rc $((SECONDS - t0)) s: $last"
  grep -E "^(FAILED|ERROR)" $OUT/$log.log | cut -c1-300
  [[ "$last" == *passed* && "$last" != *failed* && "$last" != *error* ]]
}
# The quick subset an experiment's call runs before timing it: both V-blocks, GVA 1/2/8, single tokens,
# a chunk under 64, both walk forms (5 CTAs), CP with tail starts (sessions 47–48's calls).
QUICK_K="(gva1-fp32-vk-g30-bv128 or gva8 or single-tokens or under-one-chunk or P8-tail or 5ctas) and not kkt-forms"
# gpu_prebuild.py --test-configs: the TEST_CONFIGS entries those cases use (session 49, from
# tests/test_gpu_prebuild.py's mapping of cases to configs), so a call can build just them
QUICK_CONFIGS=0,3,5,6,7,18
errs_vs_main() {   # LOG: the error record $OUT/LOG.jsonl against session 43's record of main's kernels
  python3 bench_serving/err_compare.py $OUT/$1.jsonl bench_serving/results/h200-session43/b-tests/errs-call3.jsonl \
    bench_serving/results/h200-session43/b-tests/errs-call4.jsonl > $OUT/err-compare.txt 2>&1
  tail -n 5 $OUT/err-compare.txt
}
compiled_here() {
  echo "compiled here: $(cd $TILELANG_CACHE_DIR && find 0.1.15/linux-x86_64/kernels -mindepth 1 -maxdepth 1 -newer $STAMP | wc -l) kernels"
}
finish() {   # a call returns at most 8 files: everything else goes into one tar
  (cd $OUT && tar -czf all.tar.gz --exclude=all.tar.gz --exclude='site-*' . 2>/dev/null)
}
whole_test_file() {   # LABEL SECONDS: the GPU test file on the tree (gpu_tests, log tests-LABEL.log), its
  # errors against session 43's record (err-compare-LABEL.txt), then the call's end: only those two,
  # gpu.txt and all.tar.gz come back (sessions 52, 53, 58)
  TESTS_LOG=tests-$1 gpu_tests $2
  errs_vs_main tests-$1; cp $OUT/err-compare.txt $OUT/err-compare-$1.txt
  compiled_here
  finish
  (cd $OUT && find . -type f ! -name all.tar.gz ! -name 'err-compare-*.txt' ! -name gpu.txt ! -name tests-$1.log -delete)
}
