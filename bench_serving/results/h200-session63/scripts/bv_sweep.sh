# The persistent walk's V-block sweep (session 62's calls 3-4): both widths forced, QLA only, the six
# head configs on the named mixes (the plan's walk form) and on short-item ad-hoc mixes (persistent
# forced). Run after common.sh (its env and kernels); results under $OUT/sweep/{named,ad-hoc}-bv{64,128}.
# SWEEP_S: seconds for each of the four runs (default 150).
t1=$SECONDS
NAMED="64x128,16x512,1024x8,8192x4,256x1+4096,7000+600+300+200+92"
ADHOC="128*64,64*128,48*192,32*256,24*384,16*512,8*1024,256*1+4096,64*1+2048,32*128+2048"
HEADS=16/32,16/64,16/48,8/32,4/16,2/8
for bv in 64 128; do
  QLA_BLOCK_V=$bv timeout ${SWEEP_S:-150} python3 bench_serving/kernel_bench.py --heads $HEADS --mixes $NAMED \
    --backends qla --no-prewarm --out $OUT/sweep/named-bv$bv > $OUT/sweep-named-bv$bv.log 2>&1
  echo "named bv$bv rc=$? $((SECONDS - t1)) s"
done
for bv in 64 128; do
  QLA_PERSISTENT=1 QLA_BLOCK_V=$bv timeout ${SWEEP_S:-150} python3 bench_serving/kernel_bench.py --heads $HEADS \
    --mixes "$ADHOC" --backends qla --no-prewarm --out $OUT/sweep/ad-hoc-bv$bv > $OUT/sweep-ad-hoc-bv$bv.log 2>&1
  echo "ad-hoc bv$bv rc=$? $((SECONDS - t1)) s"
done
