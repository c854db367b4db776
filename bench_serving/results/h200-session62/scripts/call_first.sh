# Session 62, first call: the GPU decides. On an H200 (none lent since session 47): issue 3's table
# for TABLE_HEADS (QLA / FlashQLA / FLA, each in its own process), as session 61's call 1 did on an
# H100. On an H100: the whole GPU test file on main (not run since sessions 58-59; runbook item 0.2),
# then Nsight Compute on the 64x128 row at 16/32 (issue 3 (a)'s H100 miss: why the walk's two-chunk
# items run at ~65 % of DRAM peak), persistent and one-CTA-per-item forms.
# Carry .gpu, .gpu-p/tlc59t.tar.xz (the test file's 407 kernels) and .gpu-p/tlc61b.tar.xz (the
# table's 90), tree slimmed. Begin with `source .gpu/prelude.sh && `.
t0=$SECONDS
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "GPU: $name"
if [[ "$name" == *H200* ]]; then
  TABLE_HEADS=${TABLE_HEADS:-16/64,16/32} CALL_END=${CALL_END:-540} \
    bash bench_serving/results/h200-session53/scripts/call_table.sh
  echo "first call $((SECONDS - t0)) s"
  exit 0
fi
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
TESTS_LOG=tests-main gpu_tests ${TESTS_S:-400}
errs_vs_main tests-main; cp $OUT/err-compare.txt $OUT/err-compare-main.txt
for form in 1 0; do
  left=$(( ${CALL_END:-545} - (SECONDS - t0) ))
  [ $left -gt 60 ] || { echo "no time for ncu form $form"; continue; }
  QLA_PERSISTENT=$form NCU_TIMEOUT=$(( left - 30 )) bash bench_serving/ncu_walk.sh $OUT/ncu-p$form 16/32 64x128 2>&1 | tail -n 25
  rm -f $OUT/ncu-p$form/walk.ncu-rep
done
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name 'err-compare-*.txt' ! -name gpu.txt ! -name tests-main.log -delete)
echo "first call $((SECONDS - t0)) s"
