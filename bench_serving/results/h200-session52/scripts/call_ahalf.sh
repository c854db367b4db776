# Session 52, call 5: what halving Aβ's stream would be worth, before building a packed Aβ (two value
# heads' triangles in one tile). Timing only (outputs wrong, no tests):
#   KH = kkt_solve storing Aβ for even value heads only (half the output stream: patches/kkt_solve_abl_ahalf.patch);
#   WH = the walk reading value head 2k's Aβ for heads 2k and 2k+1 (half the distinct bytes, the pair
#        served from L2 if it holds them; no unpacking cost: patches/fused_fwd_abl_ahalf.patch);
#   KW = both.
# Kernels: .gpu-p/tlc52f.tar.xz (the tree's, KH's and WH's for 16/64 and 16/32 at V-block 128); the
# files: carry .work/ab after scripts/kernel_files.sh.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
E=.work/ab
AB_TESTS=0 AB_PREBUILD=0 AB_BLOCK_V=plan AB_HEADS=16/64,16/32 AB_MIXES=1x32768,16384+16384,8192x4 \
  AB_DEADLINE=${AB_DEADLINE:-200} bash bench_serving/kernel_ab.sh $OUT/ab KH=$E/kkt_solve_abl_ahalf.py \
  WH=$E/fused_fwd_abl_ahalf.py KW=$E/kkt_solve_abl_ahalf.py+$E/fused_fwd_abl_ahalf.py > $OUT/ab.log 2>&1
grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -12
python3 bench_serving/results/h200-session52/scripts/kkt_only.py $OUT/ab tree KH WH KW
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name gpu.txt ! -name ab.md -delete)
echo "call $((SECONDS - t0)) s"
