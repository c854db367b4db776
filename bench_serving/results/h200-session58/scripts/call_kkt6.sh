# Session 58: kkt_solve at 6 CTAs per SM (M6, .work/ab/kkt_solve_m6.py: MIN_BLOCKS = 6, 80 registers)
# against main's 4 (127 registers). Session 23's ncu had kkt_solve's shared-memory pipe 75 % busy at
# 3.8 of 4 warps a scheduler; sessions 41 and 53 have since cut its shared stores (fp16 merges, Aβ in
# panels), and session 57 measured it at 46–49 % of the H100's DRAM peak. The quick GPU tests on M6
# (same products, same roundings: errors must be bit-equal to session 43's record), then whole calls
# and kkt_solve alone (ab.md's second table), tree and M6, each label in its own process.
# Carry .gpu, .gpu-p/tlc58.tar.xz (build_kkt6_kernels.sh) and .work/ab/kkt_solve_m6.py.
# Begin with `source .gpu/prelude.sh && `.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
END=${CALL_END:-560}
left() { echo $(( END - (SECONDS - t0) )); }
AB_TESTS=1 AB_TEST_LABELS="M6" AB_TEST_K="$QUICK_K" AB_PREBUILD=0 AB_BLOCK_V=plan \
  AB_HEADS=${AB_HEADS:-16/64,16/32,2/8} AB_MIXES=${AB_MIXES:-1x32768,16384+16384,8192x4,64x128} \
  AB_DEADLINE=$(( $(left) - 15 )) bash bench_serving/kernel_ab.sh $OUT/ab M6=.work/ab/kkt_solve_m6.py > $OUT/ab.log 2>&1
echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -40
errs_vs_main ab/errors-M6; mv $OUT/err-compare.txt $OUT/err-compare-M6-quick.txt
# Where kkt_solve's time goes now (session 23's ncu predates the fp16 merges and the panels), main's
# form and M6 on one row: full section set and source page of kkt_solve alone (the walk is not profiled).
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
QLA_CP=0 ncu_kkt tree
cp kernels/hopper/kkt_solve.py $OUT/.kkt_main.py          # the device's tree has no git history
cp .work/ab/kkt_solve_m6.py kernels/hopper/kkt_solve.py && QLA_CP=0 ncu_kkt M6
mv $OUT/.kkt_main.py kernels/hopper/kkt_solve.py
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name 'err-compare-*' ! -name gpu.txt ! -name ab.md -delete)
(cd $OUT && rm -rf ncu-*)
echo "call $((SECONDS - t0)) s"
