# Session 32: host time. 1. session 31's teardown A/B (six QLA-only kernels.py processes, TEARDOWN_CUPTI
# alternating 0 / 1, ~90 s); 2. runbook item 5: why a 16-partition CP call (2/8 1x32768) costs ~100 µs
# more host time than an 8-partition one (1x16384): host_profile.py with cProfile per row.
# Carry: .gpu-p/tlc26, tlc28, tlcab, tlc30b, tlc32h (.tar.xz; tlc32h: host_profile's 2/8 bf16-pool kernels).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
python3 bench_serving/host_profile.py --heads 2/8 --mixes 1x32768,1x16384 --cprofile $OUT/cprof \
  --out $OUT/host_profile.json > $OUT/host_profile.log 2>&1
echo "host_profile rc=$? $((SECONDS - t0)) s"; grep '^{' $OUT/host_profile.log | cut -c1-300
for f in $OUT/cprof/*; do echo "== $f"; head -n 30 "$f" | cut -c1-160; done 2>/dev/null | head -n 80
bash bench_serving/results/h200-session31/scripts/c_teardown_ab.sh 2>&1 | grep -v "^cached\|^unpacked"
echo "all $((SECONDS - t0)) s"
finish
