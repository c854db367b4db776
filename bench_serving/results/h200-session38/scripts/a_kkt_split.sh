# Session 38, calls A1 and A2 (as run): session 37's kkt_solve value-head split
# (h200-session37/exp/kkt-head-split.patch, QLA_KKT_HEADS_PER_CTA) against one CTA per (chunk, key
# head), interleaved in one process, outputs compared bit for bit first. A1 is session 37's prepared
# call (its 11 rows); A2 the same script on 13 rows around the one-wave boundary the rule uses
# (COUNTxLENGTH: "96x128" is 96 sequences of 128 tokens). Kernels: .gpu-p/tlc37x.tar.xz (the split
# forms for A1's variants, built on the CPU machine); A2's 8/32 and 16/64 forms compiled in the call.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
P=bench_serving/results/h200-session37/exp/kkt-head-split.patch
{ git apply "$P" 2>/dev/null || patch -p1 < "$P"; } > $OUT/patch.log 2>&1 || { cat $OUT/patch.log; exit 1; }
if [ "${ROWS_A2:-0}" = 0 ]; then      # A1
  timeout -k 5 ${AB_S:-300} python3 bench_serving/results/h200-session37/exp/kkt_split_ab.py --rounds 6 \
    > $OUT/kkt_split_ab.txt 2>&1
else                                  # A2
  timeout -k 5 ${AB_S:-400} python3 -c "
import sys; sys.argv=['x','--rounds','6']; sys.path.insert(0,'bench_serving/results/h200-session37/exp')
import kkt_split_ab as m
m.kb.mix_seqlens=lambda s: [int(s.split('x')[1])]*int(s.split('x')[0])
m.ROWS=[(2,8,'1x4096'),(2,8,'1x9216'),(2,8,'1x10240'),(2,8,'1x12288'),(2,8,'96x128'),(4,16,'1x1024'),(4,16,'1x4096'),(4,16,'1x6144'),(8,32,'1x1024'),(8,32,'1x2048'),(8,32,'16x512'),(16,64,'1x1024'),(16,64,'1x2048')]
m.main()" > $OUT/kkt_split_ab2.txt 2>&1
fi
echo "rc=$? $((SECONDS - t0)) s"
finish
