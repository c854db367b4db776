# Session 27, call 1: where a call's host time goes on the H200's host (cProfile per row), then the
# kkt_solve two-chunks-per-CTA A/B (runbook item 4). Carry: .gpu-p/tlc26.tar.xz, ab-kkt/ (untracked).
source bench_serving/results/h200-session27/scripts/common.sh || exit 1
python3 bench_serving/host_micro.py --out $OUT/host_micro.json > $OUT/host_micro.log 2>&1; cat $OUT/host_micro.log
timeout 150 python3 bench_serving/host_profile.py --heads 16/32,2/8,4/16 --mixes 1x8192,1x16384,16x512,8192x4 \
  --unit-norm-keys --calls 30 --cprofile $OUT/cprof --out $OUT/host_profile.json > $OUT/host_profile.log 2>&1
tail -n 15 $OUT/host_profile.log
AB_HEADS=16/32,16/64 AB_MIXES=1x32768,8192x4,64x128 AB_BLOCK_V=plan AB_TEST_K=test_matches_oracle \
  AB_DEADLINE=${AB_DEADLINE:-320} bash bench_serving/kernel_ab.sh $OUT/ab chunks2=ab-kkt/kkt_solve_chunks2.py > $OUT/ab.log 2>&1
tail -n 30 $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -40
finish
