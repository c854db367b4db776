# Session 44 (prepared on the CPU machine, no device that session): run from the branch
# exp/kkt-persist (the tree = kkt_solve with a persistent grid, the next chunk's K by TMA during this
# chunk's solve, its g and β in registers, the zero blocks cleared once per CTA).
#  1. kernel_ab.sh: the tree vs M (main's kkt_solve.py, .work/ab/kkt_solve_main.py), at the plan's
#     V-block, AB_HEADS × AB_MIXES, each label in its own process; ratios to M. The table's kkt column
#     (kernel_bench's qla_kkt_only_gpu_ms: kkt_solve alone) is the one this change moves.
#  2. the GPU tests on the tree (one process; TEST_K selects, TESTS_S bounds them: the whole file
#     needs >= 260 s with every kernel carried).
# Carry .gpu-p/tlc44.tar.xz and .gpu-p/tlc45.tar.xz (built on the CPU machine: main's whole kernel
# list, and the tree's kkt_solve kernels for the same list) and .work/ab (the label file).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
stamp=$OUT/.stamp; touch $stamp
AB=.work/ab
AB_TESTS=0 AB_PREBUILD=0 AB_BLOCK_V=plan AB_BASE=M-bvplan AB_HEADS=${AB_HEADS:-16/32,16/64,2/8} \
  AB_MIXES=${AB_MIXES:-1x32768,8192x4,1024x8,16x512} AB_DEADLINE=${AB_S:-240} \
  bash bench_serving/kernel_ab.sh $OUT/ab M=$AB/kkt_solve_main.py ${AB_EXTRA:-} > $OUT/ab.log 2>&1
echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -40
if [ "${TESTS_S:-270}" -gt 0 ]; then
  QLA_ERR_LOG=$OUT/errs.jsonl timeout -k 5 ${TESTS_S:-270} python3 -m pytest -m gpu -p no:cacheprovider -rA \
    ${TEST_K:+-k "$TEST_K"} tests/test_hopper_gpu.py > $OUT/tests.log 2>&1
  echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)"
  grep -E "^(FAILED|ERROR)" $OUT/tests.log | cut -c1-300
fi
n=$(cd $TILELANG_CACHE_DIR && find 0.1.15/linux-x86_64/kernels -mindepth 1 -maxdepth 1 -newer $stamp | wc -l)
echo "compiled here: $n kernels"
finish
