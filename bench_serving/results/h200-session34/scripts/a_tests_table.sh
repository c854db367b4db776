# Session 34, call A: 1. the whole GPU test file with session 33's walk (WG_P's P mask in exp2f), one
# pytest process (the fp64 oracle runs token by token on the GPU); beside it, on the other cores,
# FlashQLA's JIT for all six bench heads and QLA's kernels for call B's heads (HEADS_B), whose
# cache entries come back as tlc-a.tar.xz (carried by later calls if the machine went back);
# 2. issue 3's table for HEADS (each backend in its own process), once nothing compiles any more.
# Carry: .gpu-p/tlc34.tar.xz (347 kernels: the tests, 16/32 and 8/32, built on the CPU machine).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
stamp=$OUT/.stamp; touch $stamp
timeout -k 5 ${BUILD_S:-280} python3 bench_serving/gpu_prebuild.py --processes 8 --no-tests \
  --heads "${HEADS_B:-16/64,2/8,4/16,16/48}" > $OUT/prebuild-b.log 2>&1 &
timeout -k 5 ${BUILD_S:-280} python3 - > $OUT/prewarm.log 2>&1 <<'PY' &
import sys
sys.path.insert(0, "bench_serving")
import kernels
heads = [(16, 32), (8, 32), (16, 64), (2, 8), (4, 16), (16, 48)]
print("FlashQLA prewarm s", kernels.prewarm(heads, list(kernels.SEQLENS), timeout_s=260, jobs=6))
PY
QLA_ERR_LOG=$OUT/errs.jsonl timeout -k 5 ${TESTS_S:-300} python3 -m pytest -m gpu -p no:cacheprovider -rA \
  ${TEST_K:+-k "$TEST_K"} tests/test_hopper_gpu.py > $OUT/tests.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)"
grep -E "^(FAILED|ERROR)" $OUT/tests.log | cut -c1-200
wait
echo "builds done $((SECONDS - t0)) s: $(tail -n 1 $OUT/prebuild-b.log) / $(tail -n 1 $OUT/prewarm.log)"
(cd $TILELANG_CACHE_DIR && find 0.1.15/linux-x86_64/kernels -mindepth 1 -maxdepth 1 -newer $stamp \
  | tar -cJf $OUT/tlc-a.tar.xz -T -) && echo "tlc-a: $(tar -tJf $OUT/tlc-a.tar.xz | grep -c '/$') entries"
end=$(( t0 + ${CALL_S:-575} ))
timeout -k 5 $(( end - SECONDS - 5 )) python3 bench_serving/kernels.py --heads "${HEADS:?}" --isolate \
  --backends qla,flashqla,fla --out $OUT/table --budget-s $(( end - SECONDS - ${AGREE_S:-60} )) > $OUT/table.log 2>&1
echo "table rc=$? $((SECONDS - t0)) s"; grep -E "^\[bench\]|of [0-9]+" $OUT/table.log | cut -c1-200 | tail -n 60
finish
