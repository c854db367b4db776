# Session 27: issue 3's table (QLA / FlashQLA / FLA, same run) for HEADS, kernel caches carried
# (QLA's tlc*.tar.xz and FlashQLA's tlc-fq.tar.xz: its prewarm then only loads).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
end=$(( t0 + ${CALL_S:-560} ))
timeout -k 5 $(( end - SECONDS - 5 )) python3 bench_serving/kernels.py --heads "${HEADS:?}" \
  --backends qla,flashqla,fla --out $OUT/table --budget-s $(( end - SECONDS - 45 )) > $OUT/table.log 2>&1
echo "table rc=$? $((SECONDS - t0)) s"; grep -E "^\[bench\]|of [0-9]+" $OUT/table.log | cut -c1-200 | tail -n 90
finish
