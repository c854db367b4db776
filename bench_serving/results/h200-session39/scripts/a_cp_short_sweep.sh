# Session 39, call A: the CP rule's short rows (runbook item 0). QLA's whole prefill with a single
# 2048–6144-token sequence forced to P = 1…6, 8 partitions at both V-blocks, all six head configs
# (session 38's call F had P = 1, 2, 4, 8 at the plan's V-block and four heads). Kernels all cached
# (tlc34–tlc38).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
timeout -k 5 ${SWEEP_S:-400} python3 bench_serving/kernel_bench.py --cp-sweep \
  --heads ${HEADS:-2/8,4/16,8/32,16/32,16/64,16/48} --mixes 2048,3072,4096,5120,6144 \
  --cp-parts 1,2,3,4,5,6,8 --cp-block-v 64,128 --out $OUT/cp-sweep \
  --budget-s $(( ${SWEEP_S:-400} - 30 )) > $OUT/cp-sweep.log 2>&1
echo "sweep rc=$? $((SECONDS - t0)) s"; grep -E "^\[cp-sweep\]" $OUT/cp-sweep.log | cut -c1-150 | tail -n 40
finish
