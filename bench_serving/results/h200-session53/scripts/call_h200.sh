# Session 53, call 2 (H200): (1) the panels A/B again, labels in the order tree, M, T2, M2 (M, M2 =
# main's two kernel files; T2 = the tree's own files), heads AB_HEADS × AB_MIXES at the plan's
# V-block, no tests (call 1 ran them); (2) issue 3's table for TABLE_HEADS (all twelve mixes) on the
# tree, QLA / FlashQLA / FLA each in its own process (--isolate), FlashQLA and FLA JIT-compiling
# there (--no-prewarm). Carry .gpu, .gpu-p/tlc53.tar.xz and .work/ab.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
END=${CALL_END:-560}
left() { echo $(( END - (SECONDS - t0) )); }
source bench_serving/results/h200-session53/scripts/ab_labels.sh
AB_TESTS=0 AB_PREBUILD=0 AB_BLOCK_V=plan AB_HEADS=${AB_HEADS:-16/64,16/32} \
  AB_MIXES=${AB_MIXES:-1x32768,16384+16384,8192x4,1x8192} AB_DEADLINE=${AB_S:-150} \
  bash bench_serving/kernel_ab.sh $OUT/ab M=$M T2=$T2 M2=$M > $OUT/ab.log 2>&1
echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -16
python3 bench_serving/results/h200-session52/scripts/kkt_only.py $OUT/ab tree M T2 M2
timeout -k 5 $(( $(left) - 10 )) python3 bench_serving/kernel_bench.py --heads "${TABLE_HEADS:-16/64}" \
  --isolate --no-prewarm --backends qla,flashqla,fla --out $OUT/table \
  --budget-s $(( $(left) - 50 )) > $OUT/table.log 2>&1
echo "table rc=$? $((SECONDS - t0)) s"; grep -E "^\[bench\]|of [0-9]+" $OUT/table.log | cut -c1-220 | tail -n 20
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name gpu.txt ! -name ab.md ! -name 'kernels.*' -delete)
echo "call $((SECONDS - t0)) s"
