# Session 58: kkt_solve without its o_s clear (Z, .work/ab/kkt_solve_z.py = ../kkt_solve_z.py; the
# partial chunk's store masked to Aβ's lower blocks instead) against main's. Call 1's ncu (16/32 8192×4,
# H100): kkt_solve bound by the LSU's wavefronts (L1 data pipe 75 %), 256 of a CTA's ~2430 shared
# wavefronts on that clear (16 per 16-byte store: the swizzled tile against a row-major fill).
# The quick GPU tests on Z (Aβ's NaN poison checks that nothing reads the unwritten blocks; same
# products: errors must be bit-equal to session 43's record), whole calls and kkt_solve alone
# (ab.md's second table), each label in its own process, then Z's ncu on call 1's row.
# Carry .gpu, .gpu-p/tlc58z.tar.xz (build_kktz_kernels.sh) and .work/ab/kkt_solve_z.py.
# Begin with `source .gpu/prelude.sh && `.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
END=${CALL_END:-560}
left() { echo $(( END - (SECONDS - t0) )); }
AB_TESTS=1 AB_TEST_LABELS="Z" AB_TEST_K="$QUICK_K" AB_PREBUILD=0 AB_BLOCK_V=plan \
  AB_HEADS=${AB_HEADS:-16/64,16/32,2/8} AB_MIXES=${AB_MIXES:-1x32768,16384+16384,8192x4,64x128} \
  AB_DEADLINE=$(( $(left) - 15 )) bash bench_serving/kernel_ab.sh $OUT/ab Z=.work/ab/kkt_solve_z.py > $OUT/ab.log 2>&1
echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -40
errs_vs_main ab/errors-Z; mv $OUT/err-compare.txt $OUT/err-compare-Z-quick.txt
# Where kkt_solve's time goes now (session 23's ncu predates the fp16 merges and the panels), main's
# form and Z on one row: full section set and source page of kkt_solve alone (the walk is not profiled).
ncu_kkt() {   # tag: the checkout's kkt_solve.py as it is now
  local left=$(( END - (SECONDS - t0) - 20 ))
  [ $left -gt 60 ] || { echo "ncu $1: ${left}s left, skipped"; return; }
  mkdir -p $OUT/ncu-$1
  timeout -k 5 $(( left < 150 ? left : 150 )) ncu --clock-control none --set full --import-source yes --nvtx \
    --nvtx-include "profile/" --kernel-name regex:qla_kkt_solve -f -o $OUT/ncu-$1/kkt \
    python3 bench_serving/walk_once.py --heads 16/32 --mix 8192x4 --calls 3 > $OUT/ncu-$1/ncu.log 2>&1
  echo "ncu $1 rc=$? $((SECONDS - t0)) s"
  ncu --import $OUT/ncu-$1/kkt.ncu-rep --page details --print-details all > $OUT/ncu-$1/details.txt 2>&1
  ncu --import $OUT/ncu-$1/kkt.ncu-rep --page raw --csv 2>&1 | gzip > $OUT/ncu-$1/raw.csv.gz
  ncu --import $OUT/ncu-$1/kkt.ncu-rep --kernel-name qla_kkt_solve_kernel --page source --csv --print-source sass \
    2>&1 | gzip > $OUT/ncu-$1/source-qla_kkt_solve.csv.gz
  rm -f $OUT/ncu-$1/kkt.ncu-rep
  grep -E "Duration|Registers Per|Achieved Occupancy|Memory Throughput|DRAM Throughput|Shared|L1/TEX Hit|Issue Slots|Warp Cycles Per Issued" \
    $OUT/ncu-$1/details.txt | head -14
}
cp kernels/hopper/kkt_solve.py $OUT/.kkt_main.py          # the device's tree has no git history
cp .work/ab/kkt_solve_z.py kernels/hopper/kkt_solve.py && QLA_CP=0 ncu_kkt Z
mv $OUT/.kkt_main.py kernels/hopper/kkt_solve.py
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name 'err-compare-*' ! -name gpu.txt ! -name ab.md -delete)
(cd $OUT && rm -rf ncu-*)
echo "call $((SECONDS - t0)) s"
