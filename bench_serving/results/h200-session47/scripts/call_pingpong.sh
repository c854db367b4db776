# Session 47: run from the branch exp/pingpong. QLA_PINGPONG=1 makes the two V-block-128 consumers
# take turns at their chunk's X [Kᵀ | Qᵀ] product (named barriers 8 / 9, FlashAttention-3's
# warpgroup ping-pong); off, every kernel is main's. Carry .gpu-p/tlc44…46 (main's kernels) and
# .gpu-p/tlc48.tar.xz (the ping-pong walks of the tests' variants and of 16/32, 16/64, 2/8 at V-block
# 128, built on the CPU machine).
#   MODE=ab (default): a quick subset of the GPU tests with the switch on (a wrong or hung turn
#     order shows here, and then nothing is timed), then kernel_ab.sh: the tree (switch off) against
#     G (the same files, switch on), AB_HEADS × AB_MIXES at the plan's V-block, each label in its own
#     process.
#   MODE=tests: the whole GPU test file with the switch on, errors against session 43's record.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
if [ "${MODE:-ab}" = tests ]; then
  QLA_PINGPONG=1 TESTS_LOG=tests-pingpong gpu_tests ${TESTS_S:-420}
  errs_vs_main tests-pingpong
else
  QLA_PINGPONG=1 TESTS_LOG=tests-pingpong-quick \
    TEST_K="${TEST_K:-$QUICK_K}" \
    gpu_tests ${TESTS_S:-110}
  if [ $? -ne 0 ]; then
    echo "ping-pong quick tests did not pass: nothing timed"; compiled_here; finish; exit 0
  fi
  AB_TESTS=0 AB_PREBUILD=0 AB_BLOCK_V=plan AB_LABEL_ENV="G:QLA_PINGPONG=1" AB_HEADS=${AB_HEADS:-16/64,16/32,2/8} \
    AB_MIXES=${AB_MIXES:-1x32768,8192x4,16384+16384,1024x8} AB_DEADLINE=$(( ${AB_END:-420} - (SECONDS - t0) )) \
    bash bench_serving/kernel_ab.sh $OUT/ab G=kernels/hopper/fused_fwd.py > $OUT/ab.log 2>&1
  echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -40
fi
compiled_here
finish
