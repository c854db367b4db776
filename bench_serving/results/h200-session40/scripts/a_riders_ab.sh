# Session 40's plan for the next lease, call A: the riders-from-pool kernels
# (h200-session40/exp/riders-from-pool.patch: session 39's branch, rebased on main) against
# the checkout's, alternated process by process on one machine (A B A B): session 39's ×1.02–1.21 on
# V-block-64 splits compared two leases. Per label and round: (1) pure CP rows at V-block 64, forced
# P = 2, 4, 8 and the rule (where call D read slower); (2) rider rows at the plan's V-block, forced
# P = 1, 4, 8 and the rule. The "pool" copy of the package is laid out like the installed one and put
# first on PYTHONPATH (kernel_ab.sh's way). Eight runs of RUN_S (60) s at most: ~8.5 min with the setup;
# carry the kernel caches of both forms (built here: gpu_prebuild.py, and again from a site copy of
# the patched package), or the first runs compile.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
ROOT=$PWD
site=$OUT/site-pool
source bench_serving/results/h200-session40/scripts/candidates.sh
pool_site $site $OUT || exit 1
(cd / && PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH} python3 -c "import qla_serve.kernels.hopper.cp as m; assert m.__file__.startswith('$site'), m.__file__; assert m.DEFAULT_PARAMS.rider_us == 0.03; print('pool copy:', m.__file__)") || exit 1
echo "setup $((SECONDS - t0)) s"
run() {  # label round
  local dir=$OUT/$1-r$2 base=$ROOT pp=""
  [ "$1" = pool ] && base=$site pp=$site
  (cd $base && PYTHONPATH=$pp${PYTHONPATH:+:$PYTHONPATH} timeout -k 5 ${RUN_S:-60} python3 bench_serving/kernel_bench.py \
    --cp-sweep --heads ${HEADS_CP:-2/8,4/16,16/32,16/64} --mixes "4096,8192+13*1" --cp-parts 2,4,8 --cp-block-v 64 \
    --out $dir/cp --budget-s $(( ${RUN_S:-60} - 15 )) > $dir-cp.log 2>&1)
  (cd $base && PYTHONPATH=$pp${PYTHONPATH:+:$PYTHONPATH} timeout -k 5 ${RUN_S:-60} python3 bench_serving/kernel_bench.py \
    --cp-sweep --heads ${HEADS_R:-2/8,4/16,16/32,16/64} --mixes "256*1+4096,8192+256*1" --cp-parts 1,4,8 \
    --out $dir/riders --budget-s $(( ${RUN_S:-60} - 15 )) > $dir-riders.log 2>&1)
  echo "$1 round $2: $((SECONDS - t0)) s, rows $(grep -c '"gpu_ms"' $dir/cp/cp_sweep.json 2>/dev/null) + $(grep -c '"gpu_ms"' $dir/riders/cp_sweep.json 2>/dev/null)"
}
for r in 1 2; do run tree $r; run pool $r; done
python3 bench_serving/results/h200-session40/ab_riders.py $OUT | tee $OUT/ab.md
rm -rf $OUT/stage
finish
