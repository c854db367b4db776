# Session 63, call 2: main with the persistent walk's paired final-state store (kept after call 1's
# A/B): the whole GPU test file (errors against session 43's record), the V-block sweep (bv_sweep.sh)
# that refits PERSISTENT_COST_US for this GPU, then while the call has time issue 3's short-item rows
# through the plan against FlashQLA and FLA in the same run (each backend in its own process).
# Kernels: .gpu-p/tlc63.tar.xz (gpu_prebuild.py at this tree, every bench head, both V-blocks, the
# test file's, through gpu_cache_subset.sh). Carry .gpu and that tar, tree slimmed.
# Begin with `source .gpu/prelude.sh && `.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
TESTS_LOG=tests-pairs gpu_tests ${TESTS_S:-300}
errs_vs_main tests-pairs; cp $OUT/err-compare.txt $OUT/err-compare-pairs.txt
SWEEP_S=${SWEEP_S:-100} bash bench_serving/results/h200-session63/scripts/bv_sweep.sh
END=${CALL_END:-570}
left=$(( END - (SECONDS - t0) ))
if [ $left -gt 120 ]; then
  timeout -k 5 $(( left - 15 )) python3 bench_serving/kernel_bench.py --heads "${TABLE_HEADS:-16/32,16/64}" \
    --mixes "${TABLE_MIXES:-64x128,256x1+4096,16x512}" --isolate --no-prewarm --backends qla,flashqla,fla \
    --out $OUT/table --budget-s $(( left - 50 )) > $OUT/table.log 2>&1
  echo "table rc=$? $((SECONDS - t0)) s"; grep -E "^\| 16/" $OUT/table/kernels.md | head -20
else
  echo "no time for the table ($left s left)"
fi
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name 'err-compare-*.txt' ! -name gpu.txt ! -name tests-pairs.log -delete)
echo "call $((SECONDS - t0)) s"
