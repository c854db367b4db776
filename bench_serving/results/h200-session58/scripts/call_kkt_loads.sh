# Session 58, for the next lease (built, never run): two kkt_solve candidates against the
# prologue's load latency, which Z's ncu (call 2) put at two-fifths of kkt_solve's stall samples.
# - P2 (.work/ab/kkt_solve_p2.py = ../kkt_solve_p2.py): two chunks a CTA, both chunks' K, g and β
#   loaded by cp.async up front (T.Pipelined), the second's wait after the first's solve. 68 KB of
#   shared memory a CTA (main's ~30: the double K buffer, nothing reused across the loop), so three
#   CTAs fit an SM where main has four; the grid halves (a kept form would let the plan pick one or
#   two chunks a CTA). 128 registers, no spills (12 bytes at 16/48).
# - L2P (.work/ab/kkt_solve_l2p.py = ../kkt_solve_l2p.py): main's kernel whose CTAs first issue
#   prefetch.global.L2 for the K, g and β rows of the CTA 4 × 132 places after them in launch order,
#   the one likely to take their SM slot next. 127 registers, no spills.
# The quick GPU tests on both (same products: errors must be bit-equal to session 43's record), whole
# calls and kkt_solve alone against the tree (main with Z), then each one's ncu on call 1's row.
# Carry .gpu, .gpu-p/tlc58q.tar.xz (build_kkt_loads_kernels.sh) and .work/ab (both files).
# Begin with `source .gpu/prelude.sh && `.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
END=${CALL_END:-560}
left() { echo $(( END - (SECONDS - t0) )); }
AB_TESTS=1 AB_TEST_LABELS="P2 L2P" AB_TEST_K="$QUICK_K" AB_PREBUILD=0 AB_BLOCK_V=plan \
  AB_HEADS=${AB_HEADS:-16/64,16/32,2/8} AB_MIXES=${AB_MIXES:-1x32768,16384+16384,8192x4,64x128} \
  AB_DEADLINE=$(( $(left) - 15 )) bash bench_serving/kernel_ab.sh $OUT/ab P2=.work/ab/kkt_solve_p2.py L2P=.work/ab/kkt_solve_l2p.py > $OUT/ab.log 2>&1
echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -40
for l in P2 L2P; do errs_vs_main ab/errors-$l; mv $OUT/err-compare.txt $OUT/err-compare-$l-quick.txt; done
# Each candidate's ncu on call 1's row (full section set and source page of kkt_solve alone): did
# the loads leave the long scoreboard?
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
cp .work/ab/kkt_solve_l2p.py kernels/hopper/kkt_solve.py && QLA_CP=0 ncu_kkt L2P
mv $OUT/.kkt_main.py kernels/hopper/kkt_solve.py
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name 'err-compare-*' ! -name gpu.txt ! -name ab.md -delete)
(cd $OUT && rm -rf ncu-*)
echo "call $((SECONDS - t0)) s"
