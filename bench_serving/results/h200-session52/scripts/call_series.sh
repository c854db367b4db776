# Session 52: kkt_solve with the series merge (patches/kkt_solve_series.patch: X = (I + M) X_d,
# M from E = X_d L_off by two products, E⁴ = 0) against main's kkt_solve, in one call. Every kernel
# the call runs comes from the CPU machine (.gpu-p/tlc52.tar.xz, unpacked by common.sh).
#   MODE=ab (default):
#     1. kernel_ab.sh: the quick GPU tests (common.sh's QUICK_K) for S, then the tree against S and S5
#        (S at 5 CTAs per SM: 96 registers, 100 bytes of spill) on AB_HEADS × AB_MIXES at the plan's
#        V-block, each label in its own process; S's errors against session 43's record of main's;
#     2. the whole GPU test file for S if time is left (FULL_TESTS_S).
#   MODE=full: only step 2 (a second call).
# Before the call, on the CPU machine: bash bench_serving/results/h200-session52/scripts/kernel_files.sh
# (the kernels into .work/ab: carry it) and bash bench_serving/gpu_slim_tree.sh out h200-session52 (then back).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
END=${CALL_END:-560}
left() { echo $(( END - (SECONDS - t0) )); }
S=.work/ab/kkt_solve_series.py
S5=.work/ab/kkt_solve_series5.py
if [ "${MODE:-ab}" = ab ]; then
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 250 > $OUT/smi.csv 2>&1 &
  SMI=$!
  AB_TESTS=1 AB_TEST_LABELS=S AB_TEST_K="$QUICK_K" AB_PREBUILD=0 AB_BLOCK_V=plan \
    AB_HEADS=${AB_HEADS:-16/64,16/32,2/8} AB_MIXES=${AB_MIXES:-1x32768,16384+16384,8192x4,1024x8} \
    AB_DEADLINE=$(( $(left) - ${FULL_TESTS_S:-0} )) \
    bash bench_serving/kernel_ab.sh $OUT/ab S=$S S5=$S5 > $OUT/ab.log 2>&1
  kill $SMI
  echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -24
  errs_vs_main ab/errors-S; mv $OUT/err-compare.txt $OUT/err-compare-S-quick.txt
fi
if [ "${FULL_TESTS_S:-0}" -gt 0 ] && [ $(left) -gt 90 ]; then
  AB_TESTS=1 AB_TEST_LABELS=S AB_BLOCK_V="" AB_DEADLINE=$(( $(left) - 10 )) \
    bash bench_serving/kernel_ab.sh $OUT/full S=$S > $OUT/full.log 2>&1
  grep "^\[ab\]" $OUT/full.log
  errs_vs_main full/errors-S; mv $OUT/err-compare.txt $OUT/err-compare-S-full.txt
fi
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name 'err-compare-*' ! -name gpu.txt ! -name ab.md -delete)
echo "call $((SECONDS - t0)) s"
