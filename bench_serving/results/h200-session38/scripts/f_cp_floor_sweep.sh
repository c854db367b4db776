# Session 38, call F: data for the CP rule's floor on short single sequences (runbook item 0): QLA's
# whole prefill with the sequence forced to P = 1, 2, 4, 8 partitions (wall and GPU-busy ms), single
# sequences of 3072–6144 tokens (48–96 chunks, under and at CPParams.min_seq_chunks = 96), the four
# issue-4 head configs, the plan's V-block. Kernels all cached (tlc34–tlc38).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
timeout -k 5 ${SWEEP_S:-200} python3 bench_serving/kernel_bench.py --cp-sweep --heads 2/8,4/16,8/32,16/32 \
  --mixes 3072,4096,5120,6144 --cp-parts 1,2,4,8 --out $OUT/cp-sweep --budget-s $(( ${SWEEP_S:-200} - 30 )) \
  > $OUT/cp-sweep.log 2>&1
echo "sweep rc=$? $((SECONDS - t0)) s"; grep -E "^\[cp-sweep\]" $OUT/cp-sweep.log | cut -c1-160 | tail -n 70
finish
