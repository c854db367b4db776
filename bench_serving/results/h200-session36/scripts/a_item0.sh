# Session 36, call A (runbook item 0): session 35's two candidates on the GPU.
#   X  = exp/kkt-xhi.patch (kkt_solve: the inverse blocks enter the merge products as bf16 heads only)
#   F  = exp/walk-p-fold-scale.patch (the walk: P's scale folded into WG_P's exponent, one pass)
#   XF = both.
# 1. the checkout's own correlated-key cases (never run before: QLA's errors ≤ 1.05× FLA's);
# 2. X's and F's GPU tests (oracle, CP, in-kernel l2norm, correlated keys);
# 3. kernel_ab.sh: tree vs X vs F vs XF at the plan's V-block, 16/32 and 8/32 × four mixes.
# Carry: .gpu-p/site.01, .gpu-p/tlc34.tar.xz, .gpu-p/tlc35ab.tar.xz (X's and F's kernels).
t0=$SECONDS
R=bench_serving/results/h200-session35/exp
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
mkdir -p .work/ab
cp kernels/hopper/kkt_solve.py .work/ab/kkt_solve_xhi.py && patch -s .work/ab/kkt_solve_xhi.py < $R/kkt-xhi.patch || exit 1
cp kernels/hopper/fused_fwd.py .work/ab/fused_fwd_fold.py && patch -s .work/ab/fused_fwd_fold.py < $R/walk-p-fold-scale.patch || exit 1
echo "setup $((SECONDS - t0)) s"
QLA_ERR_LOG=$OUT/errors-tree-corr.jsonl timeout ${CORR_S:-90} python3 -m pytest -m gpu -p no:cacheprovider -rA \
  -k correlated tests/test_hopper_gpu.py > $OUT/tests-tree-corr.log 2>&1
echo "tree correlated rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests-tree-corr.log)"
grep -E "^(PASSED|FAILED|ERROR)|Error|assert" $OUT/tests-tree-corr.log | cut -c1-240 | head -12
AB_BLOCK_V= AB_DEADLINE=${TESTS_S:-220} AB_TEST_K="test_matches_oracle or test_cp_prefill or in_kernel or correlated" \
  bash bench_serving/kernel_ab.sh $OUT/tests X=.work/ab/kkt_solve_xhi.py F=.work/ab/fused_fwd_fold.py
echo "tests $((SECONDS - t0)) s"
for l in X F; do echo "$l: $(grep -E "passed|failed" $OUT/tests/tests-$l.log | tail -n 1)"; grep -E "^(FAILED|ERROR)" $OUT/tests/tests-$l.log | cut -c1-240; done
AB_TESTS=0 AB_BLOCK_V=plan AB_HEADS=${HEADS:-16/32,8/32} AB_MIXES=${MIXES:-8192x4,1024x8,16x512,1x32768} \
  AB_DEADLINE=${AB_S:-250} bash bench_serving/kernel_ab.sh $OUT/ab X=.work/ab/kkt_solve_xhi.py \
  F=.work/ab/fused_fwd_fold.py XF=.work/ab/kkt_solve_xhi.py+.work/ab/fused_fwd_fold.py > /dev/null
echo "ab $((SECONDS - t0)) s"; cat $OUT/ab/ab.md 2>/dev/null | head -40
finish
