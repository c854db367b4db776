# Session 59: kkt_solve without its chunk_bounds read where the plan allows it (chunks_at_64c, main at
# b61da54) against label TAB (the same file with the table read always, as before;
# .work/ab/kkt_solve_tab.py), on one GPU.
#   1. the GPU tests on the tree: the quick set, the GVA-3 case, and both chunks-at-64c cases
#      (each path bit-for-bit against the other, and the oracle);
#   2. kernel_ab: whole calls and kkt_solve alone, 16/64 and 16/32, on three 64-aligned mixes and one
#      that is not (7000+600+300+200+92: TAB's path in both labels).
# Kernels: .gpu-p/tlc59a.tar.xz (scripts/build_at64_kernels.sh). Carry .gpu, that tar and .work/ab.
# Begin with `source .gpu/prelude.sh && `. ~2.5 min.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
AB_TESTS=1 AB_TEST_TREE=1 AB_TEST_LABELS=tree AB_TEST_K="($QUICK_K) or gva3 or chunks-at-64c or kkt_without" \
  AB_PREBUILD=0 AB_BLOCK_V=plan AB_HEADS=16/64,16/32 AB_MIXES=1x32768,8192x4,64x128,7000+600+300+200+92 \
  AB_DEADLINE=${AB_DEADLINE:-200} bash bench_serving/kernel_ab.sh $OUT/ab TAB=.work/ab/kkt_solve_tab.py > $OUT/ab.log 2>&1
echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -34
grep -E "chunks-at-64c|gva3" $OUT/ab/errors-tree.jsonl
errs_vs_main ab/errors-tree; mv $OUT/err-compare.txt $OUT/err-compare-tree-quick.txt
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name 'err-compare-*' ! -name gpu.txt ! -name ab.md -delete)
echo "call $((SECONDS - t0)) s"
