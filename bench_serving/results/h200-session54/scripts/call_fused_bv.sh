# Session 54 (written without a device), optional after call_inverse.sh when its label F (the walk
# that makes Aβ itself, QLA_FUSED_ABETA=1) passed its quick tests: F against the tree at the plan's
# V-block and forced to 64. At 64 WG_P has 160 registers and no spills (at 128: 64, 6 / 11 static
# spill instructions), but each value head's two CTAs make the same Aβ twice.
# Kernels: .gpu-p/tlc54i.tar.xz (every V-block of the fused forms). Carry .gpu and it.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
END=${CALL_END:-560}
left() { echo $(( END - (SECONDS - t0) )); }
W=kernels/hopper/kkt_solve.py
AB_LABEL_ENV="F:QLA_FUSED_ABETA=1" AB_TESTS=0 AB_PREBUILD=0 AB_BLOCK_V="plan 64" \
  AB_HEADS=${AB_HEADS:-16/64,16/32,2/8} AB_MIXES=${AB_MIXES:-1x32768,16384+16384,8192x4} \
  AB_DEADLINE=$(( $(left) - 15 )) bash bench_serving/kernel_ab.sh $OUT/ab F=$W > $OUT/ab.log 2>&1
echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -30
python3 bench_serving/results/h200-session52/scripts/kkt_only.py $OUT/ab tree F
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name gpu.txt ! -name ab.md -delete)
echo "call $((SECONDS - t0)) s"
