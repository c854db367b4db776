# Session 32 (run as one inline command, kept here): does a 16-partition CP call (2/8 1x32768) cost
# more host time than an 8-partition one (1x16384)? host_profile.py three times, the two rows in
# alternating order, then two QLA-only kernels.py processes (with 1x8192). Carry: .gpu-p/tlc26,
# tlc28, tlcab, tlc30b, tlc32h (.tar.xz).
source bench_serving/results/h200-session26/scripts/common.sh >/dev/null 2>&1; t0=$SECONDS
for i in 1 2 3; do
  m=1x32768,1x16384; [ $i = 2 ] && m=1x16384,1x32768
  python3 bench_serving/host_profile.py --heads 2/8 --mixes $m --out $OUT/hp$i.json > $OUT/hp$i.log 2>&1
  echo "hp $i $((SECONDS-t0)) s"
  grep '^{' $OUT/hp$i.log | python3 -c "import sys,json; [print(' ', d['mix'], d['cp_parts'], {k: d[k] for k in ('plan','cp_tables','prepare','call','fresh','launches','glue')}) for d in map(json.loads, sys.stdin)]"
done
for i in 1 2; do
  python3 bench_serving/kernels.py --backends qla --heads 2/8 --mixes 1x32768,1x16384,1x8192 --no-prewarm --no-accuracy \
    --no-agreement --out $OUT/k2-8-$i > $OUT/k$i.log 2>&1
  echo "kernels $i $((SECONDS-t0)) s"
  python3 -c "import json,sys; [print(' ', r['mix'], r['qla_cp_parts'], round(r['qla_serving_ms'],3), round(r['qla_gpu_ms'],3), {k[9:-3]: round(v) for k, v in r.items() if k.startswith('qla_host') and v}) for r in json.load(open(sys.argv[1]))['rows']]" $OUT/k2-8-$i/kernels.json
done
finish
