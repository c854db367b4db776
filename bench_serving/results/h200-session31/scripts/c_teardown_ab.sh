# Prepared in session 31, not run: how much of a kernels.py process's host time is CUPTI left
# attached by gpu_ms()'s profiler sessions, and how much process-to-process host variance? Six
# QLA-only processes on the same rows, TEARDOWN_CUPTI alternating 0 / 1 (kernels.py honours an
# explicit value); compare serving and qla_host_* per row across the pairs (~90 s).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
for i in 1 2 3; do
  for td in 0 1; do
    TEARDOWN_CUPTI=$td python3 bench_serving/kernels.py --backends qla --heads 16/32 --mixes 1x8192,16x512,1x16384,1x2048 \
      --no-prewarm --no-accuracy --no-agreement --out $OUT/td$td-$i > $OUT/td$td-$i.log 2>&1
    echo "TEARDOWN_CUPTI=$td run $i $((SECONDS - t0)) s"
    python3 -c "import json,sys; [print(' ', r['mix'], round(r['qla_serving_ms'],3), round(r['qla_gpu_ms'],3), {k[9:-3]: round(v) for k, v in r.items() if k.startswith('qla_host') and v}) for r in json.load(open(sys.argv[1]))['rows']]" $OUT/td$td-$i/kernels.json
  done
done
finish
