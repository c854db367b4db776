# Session 43, call 3, run from the branch exp/ldsm-trans (the tree = "LM": Vᵀ by ldmatrix.trans, Oᵀ by
# stmatrix.trans, Uᵀ's select only on a partial last chunk).
#  1. kernel_ab.sh: tree vs M (main's fused_fwd.py), L (the matrix instructions alone) and A (the tree
#     with Uᵀ = Wᵀ Aβᵀ issued asynchronously at V-block 64, Oᵀ's scaling and X's decay under it, and the
#     update and Uᵀ Pᵀ in flight together), at the plan's V-block, AB_HEADS × AB_MIXES, each label in
#     its own process; ratios to M;
#  2. the GPU tests on the tree (one process; TEST_K selects, TESTS_S bounds them).
# Carry .gpu-p/tlc44.tar.xz (built on the CPU machine: the tree's whole kernel list, the other
# kernels of main, and the bench kernels of M, L, A for 16/32 and 2/8) and .work/ab (the label files).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
AB=.work/ab
AB_TESTS=0 AB_BLOCK_V=plan AB_BASE=M-bvplan AB_HEADS=${AB_HEADS:-16/32,2/8} AB_MIXES=${AB_MIXES:-1x32768,8192x4,1024x8,16x512} \
  AB_DEADLINE=${AB_S:-280} bash bench_serving/kernel_ab.sh $OUT/ab M=$AB/fused_fwd_main.py \
  L=$AB/fused_fwd_l.py A=$AB/fused_fwd_async.py > $OUT/ab.log 2>&1
echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -40
gpu_tests 200
compiled_here
finish
