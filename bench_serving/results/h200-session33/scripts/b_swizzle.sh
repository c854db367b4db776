# Session 33, call B: the persistent walk's prefetched start state (x_s) in TMA's 128-byte swizzle
# (.work/ab/fused_fwd_sw.py, label sw: one T.annotate_layout; TileLang splits the TMA load into
# 128-byte columns and swizzles the consumers' reads) against the checkout's unswizzled tile, whose
# reads into the state fragment were 8-way bank conflicts once per item (runbook item 2).
# 1. sw's GPU tests (walk forms, oracle cases, CUDA graph); 2. kernels.py --backends qla per label.
# Carry: .gpu-p/tlc26, tlc28, tlcab, tlc30b (the checkout's kernels), tlc33b (sw's walks), .work/ab
# (holding fused_fwd_sw.py: the checkout's fused_fwd.py with exp/walk-x_s-swizzle.patch applied).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
AB_BLOCK_V= AB_DEADLINE=${TESTS_S:-120} \
  AB_TEST_K="${TEST_K:-test_walk_forms or test_matches_oracle or test_cuda_graph_replay}" \
  bash bench_serving/kernel_ab.sh $OUT/tests sw=.work/ab/fused_fwd_sw.py
echo "tests $((SECONDS - t0)) s: $(grep -E "passed|failed" $OUT/tests/tests-sw.log | tail -n 1)"
grep -E "^(FAILED|ERROR)" $OUT/tests/tests-sw.log | cut -c1-200 | head -20
AB_TESTS=0 AB_BLOCK_V=plan AB_HEADS=${HEADS:-16/32,16/64,8/32,16/48} AB_MIXES=${MIXES:-16x512,1024x8,64x128,8192x4} \
  AB_DEADLINE=${AB_S:-260} bash bench_serving/kernel_ab.sh $OUT/ab sw=.work/ab/fused_fwd_sw.py > /dev/null
echo "ab $((SECONDS - t0)) s"; cat $OUT/ab/ab.md 2>/dev/null | head -30
finish
