# Session 31, call B: 1. the GPU test cases call A's deadline cut (the last CP cases, the CP tail
# scan, the CP CUDA-graph replay); 2. issue 3's table for HEADS (session 29's c_table.sh), now with
# TEARDOWN_CUPTI=1 in kernels.py. Carry: .gpu-p/tlc26, tlc28, tlcab, tlc30b, tlc-fq (.tar.xz).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
if [ -n "$TEST_K" ]; then
  timeout -k 5 ${TESTS_S:-120} python3 -m pytest -m gpu -p no:cacheprovider -rA -k "$TEST_K" tests/test_hopper_gpu.py \
    > $OUT/tests.log 2>&1
  echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)"
  grep -E "^(PASSED|FAILED|ERROR)" $OUT/tests.log | cut -c1-200
fi
end=$(( t0 + ${CALL_S:-560} ))
timeout -k 5 $(( end - SECONDS - 5 )) python3 bench_serving/kernels.py --heads "${HEADS:?}" --isolate \
  --backends qla,flashqla,fla --out $OUT/table --budget-s $(( end - SECONDS - ${AGREE_S:-70} )) > $OUT/table.log 2>&1
echo "table rc=$? $((SECONDS - t0)) s"; grep -E "^\[bench\]|of [0-9]+" $OUT/table.log | cut -c1-200 | tail -n 90
finish
