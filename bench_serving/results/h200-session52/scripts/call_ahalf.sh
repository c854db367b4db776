# Session 52, call 5: what halving Aβ's stream would be worth, before building a packed Aβ (two value
# heads' triangles in one tile). Timing only (outputs wrong, no tests):
#   KH = kkt_solve storing Aβ for even value heads only (half the output stream: exp/kkt_solve_abl_ahalf.py);
#   WH = the walk reading value head 2k's Aβ for heads 2k and 2k+1 (half the distinct bytes, the pair
#        served from L2 if it holds them; no unpacking cost: exp/fused_fwd_abl_ahalf.py);
#   KW = both.
# Kernels: .gpu-p/tlc52f.tar.xz (the tree's, KH's and WH's for 16/64 and 16/32 at V-block 128).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
E=bench_serving/results/h200-session52/exp
AB_TESTS=0 AB_PREBUILD=0 AB_BLOCK_V=plan AB_HEADS=16/64,16/32 AB_MIXES=1x32768,16384+16384,8192x4 \
  AB_DEADLINE=${AB_DEADLINE:-200} bash bench_serving/kernel_ab.sh $OUT/ab KH=$E/kkt_solve_abl_ahalf.py \
  WH=$E/fused_fwd_abl_ahalf.py KW=$E/kkt_solve_abl_ahalf.py+$E/fused_fwd_abl_ahalf.py > $OUT/ab.log 2>&1
grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -12
python3 - $OUT/ab <<'PY'
import json, os, sys
for l in ("tree", "KH", "WH", "KW"):
    p = os.path.join(sys.argv[1], f"{l}-bvplan", "kernels.json")
    if os.path.exists(p):
        print(l, [(r["heads"], r["mix"], round((r.get("qla_kkt_only_gpu_ms") or 0) * 1e3, 1), round(r.get("qla_gpu_ms") or 0, 3))
                  for r in json.load(open(p))["rows"]])
PY
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name gpu.txt ! -name ab.md -delete)
echo "call $((SECONDS - t0)) s"
