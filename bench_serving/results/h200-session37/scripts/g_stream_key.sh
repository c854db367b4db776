# Session 37, call G (a fresh machine: the three uploads first, as call A): the raw stream key of
# StagedInt32.shared_to. 1. the GPU test of shared tables per stream and under capture, and the graph
# replay cases; 2. the key A/B, interleaved (exp/stream_key_ab.py); 3. host_profile.py with cProfile
# again (2/8 and 16/32, 1x16384 and 1x8192), to set against call F's.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
timeout -k 5 ${TESTS_S:-100} python3 -m pytest -m gpu -p no:cacheprovider -rA -k "share_device_tables or graph" \
  tests/test_hopper_gpu.py > $OUT/tests.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)"; grep -E "^(FAILED|ERROR)" $OUT/tests.log | cut -c1-200
timeout -k 5 ${AB_S:-120} python3 bench_serving/results/h200-session37/exp/stream_key_ab.py --rounds ${ROUNDS:-8} \
  > $OUT/stream_key_ab.txt 2>&1
echo "key A/B rc=$? $((SECONDS - t0)) s"; grep -v "^\[\|Warn" $OUT/stream_key_ab.txt | tail -n 12
timeout -k 5 ${PROF_S:-90} python3 bench_serving/host_profile.py --heads 2/8,16/32 --mixes 1x16384,1x8192 \
  --cprofile $OUT/cprof --out $OUT/host_profile.json > $OUT/host_profile.log 2>&1
echo "host_profile rc=$? $((SECONDS - t0)) s"; grep '^{' $OUT/host_profile.log | cut -c1-300
finish
