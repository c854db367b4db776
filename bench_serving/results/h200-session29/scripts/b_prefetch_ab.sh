# Session 29, call B: the persistent walk with the state prefetch (.work/ab/prefetch.py: the Aβ
# loader warp TMA-loads the next item's start state and fields into shared) against the checkout.
# 1. the alternative's GPU tests, every walk forced persistent (QLA_PERSISTENT=1), CP cases left out
#    (their walks are not persistent); 2. kernels.py --backends qla per label on the throughput rows.
# Carry: .gpu-p/tlc26.tar.xz, .gpu-p/tlc28.tar.xz, .gpu-p/tlcab.tar.xz (the alternative's
# persistent walks), .work/ab.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
QLA_PERSISTENT=1 AB_BLOCK_V= AB_TEST_K="${TEST_K:-not test_cp and not no_compile}" AB_DEADLINE=${TESTS_S:-200} \
  bash bench_serving/kernel_ab.sh $OUT/tests prefetch=.work/ab/prefetch.py
echo "tests $((SECONDS - t0)) s"; grep -E "passed|failed" $OUT/tests/tests-prefetch.log | tail -n 3
AB_TESTS=0 AB_BLOCK_V=plan AB_HEADS=${HEADS:-16/32,16/64,2/8} AB_MIXES=${MIXES:-64x128,16x512,1024x8,8192x4,256x1+4096} \
  AB_DEADLINE=${AB_S:-250} bash bench_serving/kernel_ab.sh $OUT/ab prefetch=.work/ab/prefetch.py
echo "ab $((SECONDS - t0)) s"
finish
