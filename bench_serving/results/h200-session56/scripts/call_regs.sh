# Session 56 (written without a device; for the next lease): the walk's register variants
# (h200-session56/regs/: consumers at 200 / WG_P 80 (R1) and 192 / 96 (R2), the o_free wait before
# Uᵀ Pᵀ; compiled clean for sm_90a, never run). The quick GPU tests on each (same products, same
# roundings: errors must be bit-equal to session 43's record), then whole calls, tree, R1, R2, each
# label in its own process.
# Carry .gpu, .gpu-p/tlc54.tar.xz (main's kernels), .gpu-p/tlc56r.tar.xz and .work/ab/r1.py,
# .work/ab/r2.py (both from build_regs_kernels.sh). Begin with `source .gpu/prelude.sh && `.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
END=${CALL_END:-560}
left() { echo $(( END - (SECONDS - t0) )); }
AB_TESTS=1 AB_TEST_LABELS="R1 R2" AB_TEST_K="$QUICK_K" AB_PREBUILD=0 AB_BLOCK_V=plan \
  AB_HEADS=${AB_HEADS:-16/64,16/32,2/8} AB_MIXES=${AB_MIXES:-1x32768,16384+16384,8192x4,64x128} \
  AB_DEADLINE=$(( $(left) - 15 )) bash bench_serving/kernel_ab.sh $OUT/ab R1=.work/ab/r1.py R2=.work/ab/r2.py > $OUT/ab.log 2>&1
echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -24
for l in R1 R2; do errs_vs_main ab/errors-$l; mv $OUT/err-compare.txt $OUT/err-compare-$l-quick.txt; done
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name 'err-compare-*' ! -name gpu.txt ! -name ab.md -delete)
echo "call $((SECONDS - t0)) s"
