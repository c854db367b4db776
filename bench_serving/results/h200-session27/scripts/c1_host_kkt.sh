# Session 27, call 1: where a call's host time goes on the H200's host (per-primitive costs, then
# cProfile per row), the CP sweep the target_ctas gate needs (runbook item 3: throughput rows at
# V-block 128, heads 8/32, 16/32, 16/64), then the kkt_solve two-chunks-per-CTA A/B (item 4).
# Carry: .gpu-p/tlc26.tar.xz; ab-kkt/ (untracked) travels with the tree.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
python3 bench_serving/host_micro.py --out $OUT/host_micro.json > $OUT/host_micro.log 2>&1; cat $OUT/host_micro.log
timeout 120 python3 bench_serving/host_profile.py --heads 16/32,2/8,4/16 --mixes 1x8192,1x16384,16x512,8192x4 \
  --unit-norm-keys --calls 30 --cprofile $OUT/cprof --out $OUT/host_profile.json > $OUT/host_profile.log 2>&1
tail -n 12 $OUT/host_profile.log | cut -c1-250; echo "host $((SECONDS - t0)) s"
timeout 100 python3 bench_serving/kernels.py --cp-sweep --heads 8/32,16/32,16/64,16/48 \
  --mixes 8192x4,16384+16384,1024x8 --cp-parts 1,2,3,4 --cp-block-v 128 --out $OUT/sweep --budget-s 80 > $OUT/sweep.log 2>&1
grep -E "^\[cp-sweep\]" $OUT/sweep.log | tail -60 | cut -c1-170; echo "sweep $((SECONDS - t0)) s"
AB_HEADS=16/32,16/64 AB_MIXES=1x32768,8192x4,64x128 AB_BLOCK_V=plan AB_TEST_K=test_matches_oracle \
  AB_DEADLINE=$(( ${CALL_S:-570} - (SECONDS - t0) - 20 )) bash bench_serving/kernel_ab.sh $OUT/ab chunks2=ab-kkt/kkt_solve_chunks2.py > $OUT/ab.log 2>&1
tail -n 20 $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -40; echo "ab $((SECONDS - t0)) s"
finish
