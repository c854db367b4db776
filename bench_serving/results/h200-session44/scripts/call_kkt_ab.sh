# Session 44 (prepared on the CPU machine, no device that session): run from the branch
# exp/kkt-persist (the tree = kkt_solve with a persistent grid, the next chunk's K by TMA during this
# chunk's solve, its g and β in registers, the zero blocks cleared once per CTA).
#  1. kernel_ab.sh: the tree vs M (main's kkt_solve.py, .work/ab/kkt_solve_main.py), at the plan's
#     V-block, AB_HEADS × AB_MIXES, each label in its own process; ratios to M. The table's kkt column
#     (kernel_bench's qla_kkt_only_gpu_ms: kkt_solve alone) is the one this change moves.
#  2. (session 45) results/h200-session45/exp/kkt_isolated.py: the tree's kkt_solve with its grid
#     capped at 132, 264, 528 CTAs (1, 2, 4 a SM), 16/32, 16/64, 2/8 × 32768 tokens: a CTA's time
#     per chunk when it has the SM to itself, the figure that decides whether Aβ can be made inside
#     the walk (results/h200-session45/README.md); ISO_S bounds it (0 skips).
#  3. the GPU tests on the tree (one process; TEST_K selects, TESTS_S bounds them: the whole file
#     needs >= 260 s with every kernel carried).
# Carry .gpu-p/tlc44.tar.xz, .gpu-p/tlc45.tar.xz and .gpu-p/tlc46.tar.xz (built on the CPU machine:
# main's whole kernel list; the tree's kkt_solve kernels with the 100 walks tlc44 lacked; step 2's
# nine capped kkt_solve kernels) and .work/ab (the label file).
# The tests and the compile count are common.sh's gpu_tests and compiled_here.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
AB=.work/ab
AB_TESTS=0 AB_PREBUILD=0 AB_BLOCK_V=plan AB_BASE=M-bvplan AB_HEADS=${AB_HEADS:-16/32,16/64,2/8} \
  AB_MIXES=${AB_MIXES:-1x32768,8192x4,1024x8,16x512} AB_DEADLINE=${AB_S:-225} \
  bash bench_serving/kernel_ab.sh $OUT/ab M=$AB/kkt_solve_main.py ${AB_EXTRA:-} > $OUT/ab.log 2>&1
echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -40
if [ "${ISO_S:-40}" -gt 0 ]; then
  timeout -k 5 ${ISO_S:-40} python3 bench_serving/results/h200-session45/exp/kkt_isolated.py --heads 16/32,16/64,2/8 \
    --out $OUT/kkt_isolated.json > $OUT/kkt_isolated.log 2>&1
  echo "isolated rc=$? $((SECONDS - t0)) s"; grep -v "TileLang:" $OUT/kkt_isolated.log | cut -c1-400
fi
gpu_tests 270
compiled_here
finish
