# Session 41, the lease's second timed call: session 40's call A (riders from the pool against the
# checkout, alternated process by process, RUN_S per run) and then kernel_split.py on the checkout
# (per-kernel GPU time of the long GPU-bound rows). Carry .gpu-p/tlc40.tar.xz.
S40=bench_serving/results/h200-session40
bash $S40/scripts/a_riders_ab.sh
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
timeout -k 5 ${SPLIT_S:-120} python3 $S40/kernel_split.py > $OUT/split.md 2> $OUT/split.err
echo "split rc=$? $((SECONDS - t0)) s"; cat $OUT/split.md
finish
