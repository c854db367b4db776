# Session 54 (written without a device; for the next lease): kkt_solve's hand-written inverse
# (QLA_KKT_INVERSE=warp: kernels/hopper/tri_inverse.py) against its TileLang form, on a GPU for the
# first time.
#   1. kkt_inverse_ab.py: Aβ and γ of both forms on the same inputs (bit-equal is the expectation),
#      kkt_solve alone on the long rows, and one value head's latency with one CTA per SM (what a
#      walk making Aβ itself would pay per chunk);
#   2. kernel_ab.sh: the quick GPU tests with the warp form (label W: the tree's own files run with
#      QLA_KKT_INVERSE=warp) and with the walk that makes Aβ itself (label F: QLA_FUSED_ABETA=1),
#      errors against session 43's record, then whole calls in the order tree, W, F.
# Kernels: .gpu-p/tlc54i.tar.xz (both forms, built on the CPU machine). Carry .gpu and it.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
END=${CALL_END:-560}
left() { echo $(( END - (SECONDS - t0) )); }
timeout -k 5 150 python3 bench_serving/results/h200-session54/scripts/kkt_inverse_ab.py --out $OUT/inverse \
  > $OUT/kkt_inverse_ab.log 2>&1
echo "kkt_inverse_ab rc=$? $((SECONDS - t0)) s"; grep -E "^(compare|speed|latency)" $OUT/kkt_inverse_ab.log | cut -c1-320
W=kernels/hopper/kkt_solve.py
AB_LABEL_ENV="W:QLA_KKT_INVERSE=warp F:QLA_FUSED_ABETA=1" AB_TESTS=1 AB_TEST_LABELS="W F" AB_TEST_K="$QUICK_K" \
  AB_PREBUILD=0 AB_BLOCK_V=plan AB_HEADS=${AB_HEADS:-16/64,16/32,2/8} AB_MIXES=${AB_MIXES:-1x32768,16384+16384,8192x4} \
  AB_DEADLINE=$(( $(left) - 15 )) bash bench_serving/kernel_ab.sh $OUT/ab W=$W F=$W > $OUT/ab.log 2>&1
echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -24
for l in W F; do errs_vs_main ab/errors-$l; mv $OUT/err-compare.txt $OUT/err-compare-$l-quick.txt; done
python3 bench_serving/results/h200-session52/scripts/kkt_only.py $OUT/ab tree W F
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name 'err-compare-*' ! -name gpu.txt ! -name ab.md \
  ! -name kkt_inverse_ab.json -delete)
echo "call $((SECONDS - t0)) s"
