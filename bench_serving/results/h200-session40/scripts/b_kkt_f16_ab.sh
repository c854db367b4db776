# Session 40's plan for the next lease, call B: kkt_solve's merge products in fp16, one pass
# (exp/kkt-f16.patch; CPU emulation exp/kkt_scheme_f16.txt: inverse 3× more precise than X-hi, Aβ no
# worse; SASS 1664 → 1488, HMMA 32 → 16, STS 129 → 104 at 16/32), and kkt_solve at 5 CTAs per SM
# (96 registers, no spill; shared 43 KB in the checkout's form, 36 KB in fp16's).
#   H  = fp16 merges          M5 = the checkout's kkt_solve, MIN_BLOCKS 5
#   H5 = fp16 + MIN_BLOCKS 5  (kkt_heads_per_cta still assumes 4 CTAs per SM in every label)
# 1. H's GPU tests (oracle, CP, in-kernel l2norm, correlated keys against FLA's errors, the split forms);
# 2. kernel_ab.sh: tree vs H vs M5 vs H5 at the plan's V-block, HEADS × MIXES (whole QLA calls).
# Build every label's kernels on the CPU machine first: AB_BUILD_ONLY=1 AB_PROCESSES=2 with the same
# labels and AB_HEADS (kernel_ab.sh), tar the new cache entries, carry them.
t0=$SECONDS
R=bench_serving/results/h200-session40/exp
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
source bench_serving/results/h200-session40/scripts/candidates.sh
kkt_labels .work/ab || exit 1
echo "setup $((SECONDS - t0)) s"
AB_BLOCK_V= AB_DEADLINE=${TESTS_S:-200} AB_TEST_K="test_matches_oracle or test_cp_prefill or in_kernel or correlated or kkt_split" \
  bash bench_serving/kernel_ab.sh $OUT/tests H=.work/ab/kkt_solve_f16.py
echo "tests $((SECONDS - t0)) s: $(grep -E "passed|failed" $OUT/tests/tests-H.log | tail -n 1)"
grep -E "^(FAILED|ERROR)" $OUT/tests/tests-H.log | cut -c1-240
AB_TESTS=0 AB_BLOCK_V=plan AB_HEADS=${HEADS:-16/32,2/8} AB_MIXES=${MIXES:-1x32768,8192x4,1024x8,16x512} \
  AB_DEADLINE=${AB_S:-380} bash bench_serving/kernel_ab.sh $OUT/ab H=.work/ab/kkt_solve_f16.py \
  M5=.work/ab/kkt_solve_m5.py H5=.work/ab/kkt_solve_f16m5.py > /dev/null
echo "ab $((SECONDS - t0)) s"; cat $OUT/ab/ab.md 2>/dev/null | head -40
finish
