# Prepared in session 30, not run (no device time left): where does the kernels.py process's extra
# host time come from? In sessions 29-30 a QLA-only child of `kernels.py --isolate` paid 125-160 µs
# for a plan and 450-540 µs for a fresh CP call (16/32 1x8192: serving 0.566 ms on 0.164 ms of GPU),
# while host_profile.py measured 24-43 and ~190 µs for the same work on this host type (session 28),
# and session 28's short QLA-only kernels.py run served that row in 0.250 ms. Each step below is a
# fresh process on the same rows; compare plan_us / call_fresh_us / serving across them (~90 s).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
python3 bench_serving/host_profile.py --heads 16/32 --mixes 1x8192,16x512 > $OUT/host_profile.log 2>&1
echo "host_profile $((SECONDS - t0)) s"; grep '^{' $OUT/host_profile.log | cut -c1-220
for mixes in 1x8192,16x512 1x32768,1x16384,1x8192,16x512; do
  python3 bench_serving/kernels.py --backends qla --heads 16/32 --mixes $mixes --no-prewarm --no-accuracy \
    --no-agreement --out $OUT/k-$mixes > $OUT/k-$mixes.log 2>&1
  echo "kernels.py $mixes $((SECONDS - t0)) s"
  python3 -c "import json,sys; [print(r['mix'], round(r['qla_serving_ms'],3), round(r['qla_gpu_ms'],3), {k[9:]: round(v) for k, v in r.items() if k.startswith('qla_host') and v}) for r in json.load(open(sys.argv[1]))['rows']]" $OUT/k-$mixes/kernels.json
done
finish
