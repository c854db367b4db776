# Session 36, calls C/D: issue 3's table (QLA with X-hi vs FlashQLA vs FLA; each backend in its own
# process) for HEADS, once call B has built every kernel (warm machine: the cache is still there).
# If the machine went back, carry call B's tlc-b.tar.xz as .gpu-p/tlc-b.tar.xz with the others.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
end=$(( t0 + ${CALL_S:-560} ))
timeout -k 5 $(( end - SECONDS - 5 )) python3 bench_serving/kernel_bench.py --heads "${HEADS:?}" --isolate --no-prewarm \
  --backends qla,flashqla,fla --out $OUT/table --budget-s $(( end - SECONDS - ${AGREE_S:-60} )) > $OUT/table.log 2>&1
echo "table rc=$? $((SECONDS - t0)) s"; grep -E "^\[bench\]|of [0-9]+" $OUT/table.log | cut -c1-200 | tail -n 60
finish
