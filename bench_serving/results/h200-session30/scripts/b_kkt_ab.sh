# Session 30, call B: two kkt_solve variants against the checkout (call A's noos5L less its
# output-tile removal): L = the single-select L build (e^x as 2^x on log2e-scaled γ), Lt = L with
# the four merge products in tf32 (fp32 operands, one mma pass) instead of split bf16 (three).
# 1. the checkout's walk-form cases (new: bf16 pools 2 bytes off a 16-byte boundary), every call
#    forced onto the TileLang backend; 2. L's and Lt's GPU tests (oracle, walk forms, in-kernel
#    l2norm); 3. kernels.py --backends qla per label. Carry: .gpu-p/tlc26, tlc28, tlcab, tlc30b
#    (.tar.xz: the variants' kkt kernels), .work/ab.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
QLA_ERR_LOG=$OUT/errors-tree-walk.jsonl timeout ${WALK_S:-100} python3 -m pytest -m gpu -s -p no:cacheprovider -rA \
  -k "test_walk_forms" tests/test_hopper_gpu.py > $OUT/tests-tree-walk.log 2>&1
echo "tree walk forms rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests-tree-walk.log)"
grep -E "^(PASSED|FAILED|ERROR)" $OUT/tests-tree-walk.log | cut -c1-160
AB_BLOCK_V= AB_DEADLINE=${TESTS_S:-200} AB_TEST_K="${TEST_K:-test_matches_oracle or test_walk_forms or in_kernel}" \
  bash bench_serving/kernel_ab.sh $OUT/tests L=.work/ab/kkt_solve_L.py Lt=.work/ab/kkt_solve_Lt.py
echo "tests $((SECONDS - t0)) s"; for l in L Lt; do echo "$l: $(grep -E "passed|failed" $OUT/tests/tests-$l.log | tail -n 1)"; done
AB_TESTS=0 AB_BLOCK_V=plan AB_HEADS=${HEADS:-16/32,16/64,2/8} AB_MIXES=${MIXES:-1x32768,8192x4,1024x8,16x512,64x128} \
  AB_DEADLINE=${AB_S:-260} bash bench_serving/kernel_ab.sh $OUT/ab L=.work/ab/kkt_solve_L.py Lt=.work/ab/kkt_solve_Lt.py > /dev/null
echo "ab $((SECONDS - t0)) s"; cat $OUT/ab/ab.md 2>/dev/null | head -24
finish
