# Session 53, call 4: issue 3's table for TABLE_HEADS (all twelve mixes) on the tree (Aβ in panels),
# QLA / FlashQLA / FLA each in its own process (--isolate), FlashQLA and FLA JIT-compiling there
# (--no-prewarm). Carry .gpu and .gpu-p/tlc53.tar.xz (the tree's bench kernels). Session 64: TABLE_MIXES
# (comma-separated SEQLENS names) limits the rows.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
END=${CALL_END:-560}
timeout -k 5 $(( END - (SECONDS - t0) - 10 )) python3 bench_serving/kernel_bench.py --heads "${TABLE_HEADS:-16/64}" ${TABLE_MIXES:+--mixes "$TABLE_MIXES"} \
  --isolate --no-prewarm --backends qla,flashqla,fla --out $OUT/table \
  --budget-s $(( END - (SECONDS - t0) - 50 )) > $OUT/table.log 2>&1
echo "table rc=$? $((SECONDS - t0)) s"; grep -E "^\[bench\]|of [0-9]+" $OUT/table.log | cut -c1-220 | tail -n 30
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name gpu.txt ! -name 'kernels.*' -delete; rm -rf table/isolated-*)
echo "call $((SECONDS - t0)) s"
