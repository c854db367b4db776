# Session 62: issue 3's rows that the persistent-walk V-block rule (kernels/hopper/__init__.py,
# narrow_for_persistent) changes on an H100, through the plan (no forced width), against FlashQLA and
# FLA in the same run, each backend in its own process (--isolate), plus 16x512 and 1024x8, which it
# leaves at V-block 128. Carry .gpu, .gpu-p/tlc59t.tar.xz and .gpu-p/tlc61b.tar.xz (main's kernels;
# the rule changes no kernel). Begin with `source .gpu/prelude.sh && `.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
END=${CALL_END:-520}
timeout -k 5 $(( END - (SECONDS - t0) - 10 )) python3 bench_serving/kernel_bench.py --heads "${TABLE_HEADS:-16/32,16/64,16/48}" \
  --mixes "${TABLE_MIXES:-64x128,256x1+4096,16x512,1024x8}" --isolate --no-prewarm --backends qla,flashqla,fla \
  --out $OUT/table --budget-s $(( END - (SECONDS - t0) - 50 )) > $OUT/table.log 2>&1
echo "table rc=$? $((SECONDS - t0)) s"; grep -E "^\[bench\]|of [0-9]+" $OUT/table.log | cut -c1-220 | tail -n 30
grep -E "^\| 16/" $OUT/table/kernels.md | head -40
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name gpu.txt ! -name 'kernels.*' -delete; rm -rf table/isolated-*)
echo "call $((SECONDS - t0)) s"
