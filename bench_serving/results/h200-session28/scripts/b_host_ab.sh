# Session 28, call B: why the table process's host work is 2-5x slower than host_profile.py's on
# the same calls. host_profile.py in fresh processes, each after one of: nothing, FLA + FlashQLA
# imported, one torch profiler session (kernels.py's GPU-busy timing), both, both + gc.freeze().
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
for before in none anchors profiler anchors,profiler anchors,profiler,gc-freeze; do
  b=$before; [ "$b" = none ] && b=""
  timeout 90 python3 bench_serving/host_profile.py --heads 16/32,2/8 --mixes 1x8192,16x512 --unit-norm-keys \
    --calls 30 --before "$b" --out $OUT/host-${before//,/+}.json > $OUT/host-${before//,/+}.log 2>&1
  echo "== before: $before ($((SECONDS - t0)) s)"; grep '^{' $OUT/host-${before//,/+}.log | cut -c1-330
done
finish
