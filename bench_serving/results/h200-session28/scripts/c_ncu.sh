# Session 28: runbook item 1, where the persistent walk's time goes on a many-short-sequence row
# (16/32 64x128: 0.82-0.94x FlashQLA at every head config), QLA and then FlashQLA on the same row.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
timeout 150 bash bench_serving/ncu_walk.sh $OUT/ncu-64x128 16/32 64x128 > $OUT/ncu-qla.log 2>&1; tail -n 40 $OUT/ncu-qla.log
echo "ncu qla $((SECONDS - t0)) s"
BACKEND=flashqla timeout 150 bash bench_serving/ncu_walk.sh $OUT/ncu-64x128-fq 16/32 64x128 > $OUT/ncu-fq.log 2>&1
tail -n 30 $OUT/ncu-fq.log; echo "ncu fq $((SECONDS - t0)) s"
finish
