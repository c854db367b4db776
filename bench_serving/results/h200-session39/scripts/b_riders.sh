# Session 39, call B: the rider charge (CPParams.rider_us) measured directly, then issue 3's table
# rows the session's rule changes. (1) QLA's whole prefill on a long prompt with one-token riders,
# forced to P = 1, 2, 4, 8 at the plan's V-block, six head configs; (2) 7000+600+300+200+92 and
# 256x1+4096 for all six heads against FlashQLA and FLA (each backend in its own process).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
timeout -k 5 ${SWEEP_S:-200} python3 bench_serving/kernel_bench.py --cp-sweep \
  --heads 2/8,4/16,8/32,16/32,16/64,16/48 --mixes "256*1+4096,8192+256*1,8192+13*1,16384+64*1" \
  --cp-parts 1,2,4,8 --out $OUT/riders --budget-s $(( ${SWEEP_S:-200} - 20 )) > $OUT/riders.log 2>&1
echo "riders rc=$? $((SECONDS - t0)) s"; grep -E "^\[cp-sweep\]" $OUT/riders.log | cut -c1-110 | tail -n 100
end=$(( SECONDS + ${TABLE_S:-200} ))
timeout -k 5 $(( end - SECONDS - 5 )) python3 bench_serving/kernel_bench.py --heads 2/8,4/16,8/32,16/32,16/64,16/48 \
  --mixes "7000+600+300+200+92,256x1+4096" --isolate --no-prewarm --backends qla,flashqla,fla --out $OUT/table \
  --budget-s $(( end - SECONDS - 30 )) > $OUT/table.log 2>&1
echo "table rc=$? $((SECONDS - t0)) s"; grep -E "^\[bench\].*qla=|of [0-9]+" $OUT/table.log | cut -c1-170 | tail -n 20
finish
