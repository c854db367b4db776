# Session 53, call 1: Aβ stored and loaded as its lower-triangular 16-row blocks only
# (kkt_solve.ABETA_PANEL: four TMA boxes a chunk, 62.5 % of the bytes), the checkout's kernels
# ("tree") against main's (M: .work/ab/{kkt_solve,fused_fwd}_main.py, `git show e56ccbc:…`).
#   1. the quick GPU tests (QUICK_K) on the tree;
#   2. kernel_ab.sh, same inputs, each label in its own process, in the order tree, M, T2 (T2 = the
#      tree's own files again: how far two runs of the same kernels drift apart in this call);
#      heads AB_HEADS × mixes AB_MIXES at the plan's V-block (kkt_solve alone: qla_kkt_only_gpu_ms).
# Kernels: .gpu-p/tlc53.tar.xz (every kernel both versions need, built on the CPU machine).
# Carry .gpu, .gpu-p/tlc53.tar.xz and .work/ab.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
END=${CALL_END:-560}
left() { echo $(( END - (SECONDS - t0) )); }
source bench_serving/results/h200-session53/scripts/ab_labels.sh
AB_TESTS=1 AB_TEST_TREE=1 AB_TEST_LABELS=tree AB_TEST_K="$QUICK_K" AB_PREBUILD=0 AB_BLOCK_V=plan \
  AB_HEADS=${AB_HEADS:-16/64,16/32,2/8} AB_MIXES=${AB_MIXES:-1x32768,16384+16384,8192x4,1024x8} \
  AB_DEADLINE=$(( $(left) - 15 )) bash bench_serving/kernel_ab.sh $OUT/ab M=$M T2=$T2 > $OUT/ab.log 2>&1
echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -20
errs_vs_main ab/errors-tree; mv $OUT/err-compare.txt $OUT/err-compare-tree-quick.txt
python3 bench_serving/results/h200-session52/scripts/kkt_only.py $OUT/ab tree M T2
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name 'err-compare-*' ! -name gpu.txt ! -name ab.md -delete)
echo "call $((SECONDS - t0)) s"
