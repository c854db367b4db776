# Session 33, call A: kkt_solve with the fp32 column forward substitution on CUDA cores
# (.work/ab/kkt_solve_fs.py, label fs) against the checkout's split-bf16 block merges.
# 1. fs's GPU tests (fp64 oracle: lengths, GVA, gates, pools, in-kernel l2norm, gate inputs, CUDA
#    graph), every call forced onto the TileLang backend; 2. kernels.py --backends qla per label.
# Carry: .gpu-p/tlc26, tlc28, tlcab, tlc30b (the checkout's kernels), tlc33 (fs's kkt kernels),
# .work/ab (holding exp/kkt_solve_fs.py: cp bench_serving/results/h200-session33/exp/kkt_solve_fs.py .work/ab/).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
AB_BLOCK_V= AB_DEADLINE=${TESTS_S:-160} \
  AB_TEST_K="${TEST_K:-test_matches_oracle or test_walk_forms or in_kernel or test_gate_inputs or test_cuda_graph_replay}" \
  bash bench_serving/kernel_ab.sh $OUT/tests fs=.work/ab/kkt_solve_fs.py
echo "tests $((SECONDS - t0)) s: $(grep -E "passed|failed" $OUT/tests/tests-fs.log | tail -n 1)"
grep -E "^(FAILED|ERROR)" $OUT/tests/tests-fs.log | cut -c1-200 | head -20
AB_TESTS=0 AB_BLOCK_V=plan AB_HEADS=${HEADS:-16/32,16/64,2/8} AB_MIXES=${MIXES:-1x32768,8192x4,1024x8,16x512,64x128} \
  AB_DEADLINE=${AB_S:-220} bash bench_serving/kernel_ab.sh $OUT/ab fs=.work/ab/kkt_solve_fs.py > /dev/null
echo "ab $((SECONDS - t0)) s"; cat $OUT/ab/ab.md 2>/dev/null | head -30
finish
