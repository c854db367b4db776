# Session 29: issue 3's table (QLA / FlashQLA / FLA) for HEADS with --isolate (each backend's rows
# in a process of its own, agreement after), kernel caches carried (tlc*.tar.xz; FlashQLA's tlc-fq).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
end=$(( t0 + ${CALL_S:-560} ))
timeout -k 5 $(( end - SECONDS - 5 )) python3 bench_serving/kernels.py --heads "${HEADS:?}" --isolate \
  --backends qla,flashqla,fla --out $OUT/table --budget-s $(( end - SECONDS - ${AGREE_S:-70} )) > $OUT/table.log 2>&1
echo "table rc=$? $((SECONDS - t0)) s"; grep -E "^\[bench\]|of [0-9]+" $OUT/table.log | cut -c1-200 | tail -n 90
finish
