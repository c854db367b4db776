# Session 33, call D: WG_P's P mask with exp2f of log2e-scaled γ instead of expf (WG_P's chunk loop
# 688 → 544 SASS instructions at 16/32, V-block 128; .work/ab/fused_fwd_e2.py = the checkout's
# fused_fwd.py with exp/walk-p-exp2.patch, label e2). Call C showed WG_P's pace matters (more work
# there slowed the walk ×1.13–1.16): does less work there speed it up?
# 1. e2's GPU tests (walk forms, oracle cases without CP, CUDA graph); 2. e2's kernels for the other
# bench heads (16 cores); 3. kernels.py --backends qla per label. Carry: .gpu-p/tlc26, tlc28, tlcab,
# tlc30b (the checkout's kernels), tlc33d (e2's phase-0 walks for the tests, 16/32 and 16/64, built
# like call C's), .work/ab. (Since session 33 the checkout's fused_fwd.py is e2.)
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
AB_BUILD_ONLY=1 AB_SKIP_TREE=1 AB_TESTS=0 AB_PROCESSES=16 AB_HEADS=${HEADS:-16/32,16/64,8/32,16/48} \
  bash bench_serving/kernel_ab.sh $OUT/build e2=.work/ab/fused_fwd_e2.py &
AB_BLOCK_V= AB_DEADLINE=${TESTS_S:-110} \
  AB_TEST_K="${TEST_K:-(test_walk_forms or test_matches_oracle or test_cuda_graph_replay) and not 32k and not cp}" \
  bash bench_serving/kernel_ab.sh $OUT/tests e2=.work/ab/fused_fwd_e2.py
wait
echo "tests + build $((SECONDS - t0)) s: $(grep -E "passed|failed" $OUT/tests/tests-e2.log | tail -n 1)"
grep -E "^(FAILED|ERROR)" $OUT/tests/tests-e2.log | cut -c1-200 | head -20
AB_TESTS=0 AB_BLOCK_V=plan AB_HEADS=${HEADS:-16/32,16/64,8/32,16/48} AB_MIXES=${MIXES:-16x512,1024x8,64x128,8192x4} \
  AB_DEADLINE=${AB_S:-240} bash bench_serving/kernel_ab.sh $OUT/ab e2=.work/ab/fused_fwd_e2.py > /dev/null
echo "ab $((SECONDS - t0)) s"; cat $OUT/ab/ab.md 2>/dev/null | head -30
finish
