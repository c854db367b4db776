# Session 58: kkt_solve candidates against the checkout's (tree) on one GPU, and where their time goes.
# LABELS (from build_kkt_ab_kernels.sh, which writes .work/ab/kkt_solve_<label>.py and their kernels):
# the quick GPU tests on each (same products, same roundings: errors must be bit-equal to session 43's
# record), then whole calls and kkt_solve alone (ab.md's second table), each label in its own process;
# then Nsight Compute (ncu_walk.sh, kkt_solve alone, 16/32 8192×4) on each of NCU_TAGS (default
# LABELS; "tree" is the checkout's kkt_solve).
#   call 1: LABELS=M6 NCU_TAGS="tree M6"   (carry .gpu, .gpu-p/tlc54.tar.xz, .gpu-p/tlc58.tar.xz, .work/ab)
#   call 2: LABELS=Z                       (carry .gpu, .gpu-p/tlc58z.tar.xz, .work/ab)
#   call 3 (session 59): LABELS="P2 L2P"   (carry .gpu, .gpu-p/tlc58q.tar.xz, .work/ab)
#   session 59: LABELS=GB AB_HEADS=16/48,16/32 NCU_HEADS=16/48 TEST_K="(…QUICK_K…) or gva3"
#                                          (carry .gpu, .gpu-p/tlc59g.tar.xz, .work/ab)
#               LABELS=LDP [AB_HEADS=16/64,16/32] (.gpu-p/tlc59l.tar.xz); LABELS=NB AB_HEADS=16/64,16/32
#               TEST_K=no_such_case (.gpu-p/tlc59n.tar.xz and tlc59l: an ablation, no tests)
# TEST_K replaces the quick tests' -k (common.sh's QUICK_K); NCU_HEADS the heads of the ncu runs.
# Begin with `source .gpu/prelude.sh && `.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
END=${CALL_END:-560}
left() { echo $(( END - (SECONDS - t0) )); }
labels=(${LABELS:?LABELS names the candidates})
files=()
for l in "${labels[@]}"; do files+=("$l=.work/ab/kkt_solve_${l,,}.py"); done
AB_TESTS=1 AB_TEST_LABELS="${labels[*]}" AB_TEST_K="${TEST_K:-$QUICK_K}" AB_PREBUILD=0 AB_BLOCK_V=plan \
  AB_HEADS=${AB_HEADS:-16/64,16/32,2/8} AB_MIXES=${AB_MIXES:-1x32768,16384+16384,8192x4,64x128} \
  AB_DEADLINE=$(( $(left) - 15 )) bash bench_serving/kernel_ab.sh $OUT/ab "${files[@]}" > $OUT/ab.log 2>&1
echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -40
for l in "${labels[@]}"; do errs_vs_main ab/errors-$l; mv $OUT/err-compare.txt $OUT/err-compare-$l-quick.txt; done
ncu_kkt() {   # tag: kkt_solve alone as the checkout's kkt_solve.py is now
  local s=$(( $(left) - 20 ))
  [ $s -gt 60 ] || { echo "ncu $1: ${s}s left, skipped"; return; }
  NCU_TIMEOUT=$(( s < 150 ? s : 150 )) KERNELS=qla_kkt_solve \
    bash bench_serving/ncu_walk.sh $OUT/ncu-$1 ${NCU_HEADS:-16/32} 8192x4 > /dev/null
  echo "ncu $1 $((SECONDS - t0)) s"
  rm -f $OUT/ncu-$1/walk.ncu-rep
  grep -E "Duration|Registers Per|Achieved Occupancy|Memory Throughput|DRAM Throughput|Shared|L1/TEX Hit|Issue Slots|Warp Cycles Per Issued" \
    $OUT/ncu-$1/details.txt | head -14
}
cp kernels/hopper/kkt_solve.py $OUT/.kkt_main.py          # the device's tree has no git history
for tag in ${NCU_TAGS:-${labels[*]}}; do
  if [ "$tag" = tree ]; then cp $OUT/.kkt_main.py kernels/hopper/kkt_solve.py
  else cp .work/ab/kkt_solve_${tag,,}.py kernels/hopper/kkt_solve.py; fi
  ncu_kkt $tag
done
mv $OUT/.kkt_main.py kernels/hopper/kkt_solve.py
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name 'err-compare-*' ! -name gpu.txt ! -name ab.md -delete)
(cd $OUT && rm -rf ncu-*)
echo "call $((SECONDS - t0)) s"
