# Session 62's candidate on the next lease: exp/state-store-pairs.patch (label PAIRS) against main
# (tree), on one GPU:
#   1. the quick GPU tests on PAIRS (errors must be bit-equal to session 43's record: the stored bits
#      are the same);
#   2. kernel_ab: whole calls at both forced V-blocks, 16/32, 16/64, 2/8 × 64x128, 256x1+4096,
#      16x512, 8192x4 (the persistent walk's rows, short items to long).
# Kernels: .gpu-p/tlc59t.tar.xz + .gpu-p/tlc61b.tar.xz (main's) and .gpu-p/tlc62p.tar.xz
# (scripts/build_pairs_kernels.sh through gpu_cache_subset.sh; session 62 left it as
# ~/.cache/qla-tlc62p.tar.xz). Carry .gpu, those tars and .work/ab (fused_fwd_pairs.py, which the
# build script writes). Tree slimmed. Begin with `source .gpu/prelude.sh && `. ~5 min.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
AB_TESTS=1 AB_TEST_LABELS=PAIRS AB_TEST_K="$QUICK_K" AB_PREBUILD=0 AB_BLOCK_V="64 128" \
  AB_HEADS=16/32,16/64,2/8 AB_MIXES=64x128,256x1+4096,16x512,8192x4 \
  AB_DEADLINE=${AB_DEADLINE:-420} bash bench_serving/kernel_ab.sh $OUT/ab PAIRS=.work/ab/fused_fwd_pairs.py > $OUT/ab.log 2>&1
echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -40
errs_vs_main ab/errors-PAIRS; mv $OUT/err-compare.txt $OUT/err-compare-PAIRS-quick.txt
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name 'err-compare-*' ! -name gpu.txt ! -name ab.md -delete)
echo "call $((SECONDS - t0)) s"
