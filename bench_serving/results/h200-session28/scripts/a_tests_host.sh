# Session 28, call A: the whole GPU test set at dc6e2dc+ (phase 3 starting from h where the previous
# partition was a tail start, the combine's lazy tail form, the slot gather in phase 3; every CP
# test NaN-poisons the CP buffer), then the host profile of the per-batch-shape host caches (warm
# and *_cold) on CP and plain rows. Carry: .gpu-p/tlc26.tar.xz, .gpu-p/tlc28.tar.xz (the new
# phase-3 and combine builds).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
QLA_ERR_LOG=$OUT/errs.jsonl timeout ${TESTS_S:-340} python3 -m pytest -m gpu -s -q tests/test_hopper_gpu.py \
  > $OUT/gpu-tests.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s"; grep -E "passed|failed|Error|error" $OUT/gpu-tests.log | tail -n 15
grep -E '"case": "cp' $OUT/gpu-tests.log | cut -c1-200 | head -30
timeout 120 python3 bench_serving/host_profile.py --heads 16/32,2/8 --mixes 1x8192,1x32768,8192x4,16x512 \
  --unit-norm-keys --calls 30 --out $OUT/host_profile.json > $OUT/host_profile.log 2>&1
tail -n 10 $OUT/host_profile.log | cut -c1-300; echo "host $((SECONDS - t0)) s"
finish
