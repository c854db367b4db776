# Session 58, for the next lease (built, never run): kkt_solve with two chunks a CTA (P2,
# .work/ab/kkt_solve_p2.py = ../kkt_solve_p2.py), both chunks' K, g and β loaded by cp.async up front
# (T.Pipelined) so that the second's wait comes after the first's solve. Z's ncu (call 2) had the
# prologue's loads at two-fifths of kkt_solve's stall samples. The grid halves: for the long rows
# (a kept form would let the plan pick one or two chunks a CTA, as it picks the value-head split).
# Its shared memory is 68 KB a CTA (main's ~30: the double K buffer, and nothing reused across the
# loop), so three CTAs fit an SM where main has four; 128 registers, no spills (12 bytes at 16/48).
# The quick GPU tests on P2 (same products: errors must be bit-equal to session 43's record), whole
# calls and kkt_solve alone against the tree (main with Z), then P2's ncu on call 1's row.
# Carry .gpu, .gpu-p/tlc58q.tar.xz (build_kktp2_kernels.sh) and .work/ab/kkt_solve_p2.py.
# Begin with `source .gpu/prelude.sh && `.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
END=${CALL_END:-560}
left() { echo $(( END - (SECONDS - t0) )); }
AB_TESTS=1 AB_TEST_LABELS="P2" AB_TEST_K="$QUICK_K" AB_PREBUILD=0 AB_BLOCK_V=plan \
  AB_HEADS=${AB_HEADS:-16/64,16/32,2/8} AB_MIXES=${AB_MIXES:-1x32768,16384+16384,8192x4,64x128} \
  AB_DEADLINE=$(( $(left) - 15 )) bash bench_serving/kernel_ab.sh $OUT/ab P2=.work/ab/kkt_solve_p2.py > $OUT/ab.log 2>&1
echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -40
errs_vs_main ab/errors-P2; mv $OUT/err-compare.txt $OUT/err-compare-P2-quick.txt
# P2's ncu on call 1's row (full section set and source page of kkt_solve alone): did the second
# chunk's load leave the long scoreboard?
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
cp .work/ab/kkt_solve_p2.py kernels/hopper/kkt_solve.py && QLA_CP=0 ncu_kkt P2
mv $OUT/.kkt_main.py kernels/hopper/kkt_solve.py
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name 'err-compare-*' ! -name gpu.txt ! -name ab.md -delete)
(cd $OUT && rm -rf ncu-*)
echo "call $((SECONDS - t0)) s"
