# Prepared in session 37 for the next lease (not run): runbook item 0, kkt_solve's value heads split
# over CTAs on small grids (exp/kkt-head-split.patch, QLA_KKT_HEADS_PER_CTA). The patch is applied
# to the device's copy of the tree; its kernels (the split forms, and the default form, whose TileLang
# source the patch changes) are in .gpu-p/tlc37x.tar.xz (built on the CPU machine): carry it with the
# other caches. ~2–3 min: eleven rows × up to three labels × 6 rounds of two profiled timings.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
P=bench_serving/results/h200-session37/exp/kkt-head-split.patch
{ git apply "$P" 2>/dev/null || patch -p1 < "$P"; } > $OUT/patch.log 2>&1 || { cat $OUT/patch.log; exit 1; }
echo "setup $((SECONDS - t0)) s"
timeout -k 5 ${AB_S:-240} python3 bench_serving/results/h200-session37/exp/kkt_split_ab.py --rounds ${ROUNDS:-6} \
  > $OUT/kkt_split_ab.txt 2>&1
echo "kkt split A/B rc=$? $((SECONDS - t0)) s"; grep -v "^\[\|Warn\|warn" $OUT/kkt_split_ab.txt | tail -n 14
finish
