# Session 30, call A: kkt_solve without its output staging tile (Aβ written from registers straight
# to global memory: 43 KB of shared memory, so 5 CTAs of 96 registers per SM instead of 4 of 128)
# against the checkout, with (noos5L) and without (noos5) the single-select L build (e^x as 2^x on
# log2e-scaled γ). 1. noos5L's GPU tests (every case but the CP combine / tail-scan kernels' own and
# the compile counter: each of the rest runs kkt_solve); 2. kernels.py --backends qla per label.
# Carry: .gpu-p/tlc26.tar.xz, .gpu-p/tlc28.tar.xz, .gpu-p/tlcab.tar.xz, .gpu-p/tlc30.tar.xz (the
# two alternatives' kkt kernels), .work/ab.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
AB_BLOCK_V= AB_TEST_LABELS=noos5L AB_DEADLINE=${TESTS_S:-240} \
  AB_TEST_K="${TEST_K:-not test_cp_combine_kernel and not tail_scan and not no_compile}" \
  bash bench_serving/kernel_ab.sh $OUT/tests noos5L=.work/ab/kkt_solve_noos5L.py
echo "tests $((SECONDS - t0)) s"; grep -E "passed|failed" $OUT/tests/tests-noos5L.log | tail -n 3
AB_TESTS=0 AB_BLOCK_V=plan AB_HEADS=${HEADS:-16/32,16/64,2/8} AB_MIXES=${MIXES:-1x32768,8192x4,1024x8,16x512,64x128} \
  AB_DEADLINE=${AB_S:-300} bash bench_serving/kernel_ab.sh $OUT/ab noos5=.work/ab/kkt_solve_noos5.py \
  noos5L=.work/ab/kkt_solve_noos5L.py
echo "ab $((SECONDS - t0)) s"; cat $OUT/ab/ab.md 2>/dev/null | head -40
finish
