# Session 52, call 3: kkt_solve with its Aβ store asynchronous (patches/kkt_solve_astore.patch:
# two staging tiles, T.tma_copy without a wait, T.tma_store_wait(1) before a tile is written again),
# after call 2's ablation put ~86 % of kkt_solve's time outside the merges and the substitution.
#   1. kernel_ab.sh: the quick GPU tests (QUICK_K) for AS, then the tree against AS on AB_HEADS ×
#      AB_MIXES at the plan's V-block (kkt_solve alone: the rows' qla_kkt_only_gpu_ms);
#   2. the whole GPU test file for AS if FULL_TESTS_S > 0 and time is left.
# Kernels: .gpu-p/tlc52.tar.xz + tlc52c.tar.xz (AS's bench and quick-test kernels). AS's file: carry
# .work/ab after scripts/kernel_files.sh.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
END=${CALL_END:-560}
left() { echo $(( END - (SECONDS - t0) )); }
AS=.work/ab/kkt_solve_astore.py
AB_TESTS=1 AB_TEST_LABELS=AS AB_TEST_K="$QUICK_K" AB_PREBUILD=0 AB_BLOCK_V=plan \
  AB_HEADS=${AB_HEADS:-16/64,16/32,2/8} AB_MIXES=${AB_MIXES:-1x32768,16384+16384,8192x4,1024x8} \
  AB_DEADLINE=$(( $(left) - ${FULL_TESTS_S:-0} )) bash bench_serving/kernel_ab.sh $OUT/ab AS=$AS > $OUT/ab.log 2>&1
echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -20
errs_vs_main ab/errors-AS; mv $OUT/err-compare.txt $OUT/err-compare-AS-quick.txt
python3 bench_serving/results/h200-session52/scripts/kkt_only.py $OUT/ab tree AS
if [ "${FULL_TESTS_S:-0}" -gt 0 ] && [ $(left) -gt 90 ]; then
  AB_TESTS=1 AB_TEST_LABELS=AS AB_BLOCK_V="" AB_DEADLINE=$(( $(left) - 10 )) \
    bash bench_serving/kernel_ab.sh $OUT/full AS=$AS > $OUT/full.log 2>&1
  grep "^\[ab\]" $OUT/full.log
  errs_vs_main full/errors-AS; mv $OUT/err-compare.txt $OUT/err-compare-AS-full.txt
fi
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name 'err-compare-*' ! -name gpu.txt ! -name ab.md -delete)
echo "call $((SECONDS - t0)) s"
