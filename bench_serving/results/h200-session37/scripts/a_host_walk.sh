# Session 37, call A (after the uploads; carry .gpu-p/tlc34.tar.xz, the others copied to .gpu-p/):
# 1. runbook item 3: new plans of a seen batch shape copying their device tables against sharing one
#    kept copy (StagedInt32.shared_to, in the checkout since this session), interleaved, one process;
# 2. runbook item 0's open question: the walk's two forms interleaved (exp/walk_form_ab.py);
# 3. FlashQLA's JIT for 16/48 and 4/16 on all cores, so that call D's table only loads it (the new
#    cache entries come back as tlc-a.tar.xz, for a later machine).
# Timed parts run alone: the H200 host's speed is what item 3 measures.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
timeout -k 5 ${HOST_S:-150} python3 bench_serving/results/h200-session36/exp/host_shared_ab.py \
  --rounds ${ROUNDS:-8} > $OUT/host_ab.txt 2>&1
echo "host A/B rc=$? $((SECONDS - t0)) s"; grep -v "^\[" $OUT/host_ab.txt | tail -n 12
timeout -k 5 ${WALK_S:-150} python3 bench_serving/results/h200-session37/exp/walk_form_ab.py \
  --rounds ${ROUNDS:-8} > $OUT/walk_ab.txt 2>&1
echo "walk A/B rc=$? $((SECONDS - t0)) s"; grep -v "^\[" $OUT/walk_ab.txt | tail -n 12
stamp=$OUT/.stamp; touch $stamp
timeout -k 5 ${PREWARM_S:-200} python3 - > $OUT/prewarm.log 2>&1 <<PY
import sys
sys.path.insert(0, "bench_serving")
import kernel_bench
heads = [(16, 48), (4, 16)]
print("FlashQLA prewarm s", kernel_bench.prewarm(heads, list(kernel_bench.SEQLENS), timeout_s=${PREWARM_S:-200} - 15, jobs=16))
PY
echo "prewarm rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/prewarm.log)"
(cd $TILELANG_CACHE_DIR && find 0.1.15/linux-x86_64/kernels -mindepth 1 -maxdepth 1 -newer $stamp \
  | tar -cJf $OUT/tlc-a.tar.xz -T -) && echo "tlc-a: $(tar -tJf $OUT/tlc-a.tar.xz | grep -c '/$') entries"
finish
