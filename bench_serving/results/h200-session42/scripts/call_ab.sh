# Session 42, call 3, run from the branch exp/walk-merge (the tree = "W3": W = V − e^γ K S rounded once
# to fp16 and one product with Aβ, X [Kᵀ | Qᵀ] as one N = 128 product, Aβ and P in fp16).
#  1. kernel_ab.sh: tree vs M (main's fused_fwd.py + kkt_solve.py) and W1 (only the W merge, in bf16)
#     at the plan's V-block, AB_HEADS × AB_MIXES, each label in its own process; ratios to M;
#  2. gpu_prebuild.py for the tests' kernels the CPU machine did not build (16 processes);
#  3. GPU tests on the tree (one process; TEST_K selects, TESTS_S bounds them).
# Carry .gpu-p/tlc40.tar.xz (main's kernels), .gpu-p/tlc42.tar.xz (the bench kernels of W1, W2, W3 and
# part of W3's test kernels, built on the CPU machine) and .work/ab (the label files: git show main:…
# and the branch's first commit).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
AB=.work/ab
AB_TESTS=0 AB_BLOCK_V=plan AB_BASE=M-bvplan AB_HEADS=${AB_HEADS:-16/32,2/8} AB_MIXES=${AB_MIXES:-1x32768,8192x4,1024x8,16x512} \
  AB_DEADLINE=${AB_S:-240} bash bench_serving/kernel_ab.sh $OUT/ab M=$AB/fused_fwd_main.py+$AB/kkt_solve_main.py \
  W1=$AB/fused_fwd_w1.py+$AB/kkt_solve_main.py > $OUT/ab.log 2>&1
echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -40
# the tests' kernels the CPU machine did not finish, 16 build processes
python3 bench_serving/gpu_prebuild.py --processes 16 --heads 16/32,2/8 > $OUT/prebuild.log 2>&1
echo "prebuild $((SECONDS - t0)) s: $(tail -n 1 $OUT/prebuild.log)"
gpu_tests 150
(cd $TILELANG_CACHE_DIR && find 0.1.15/linux-x86_64/kernels -mindepth 1 -maxdepth 1 -newer $STAMP \
  | tar -cJf $OUT/tlc-c.tar.xz -T -) && echo "compiled here: $(tar -tJf $OUT/tlc-c.tar.xz | grep -c '/$') entries"
finish
