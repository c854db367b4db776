#!/bin/bash
# Session 12, call 2 (nvidia-h200-x2, .gpu pack): kkt_solve variants against main.
# carry [".gpu", ".work/tlc12.tar.xz", ".work/ab12"]; command `bash .work/ab12/call2.sh`.
# GPU 0: kernel_ab: the GPU tests of "fast" (oracle cases + CUDA-graph replay, no CP), then
#        tree / tma / fast on 16/32 and 2/8 (kkt-only column in every run's JSON).
# GPU 1: per-kernel GPU time of QLA and FlashQLA (breakdown.py), then "tma"'s tests (same subset),
#        then the CP rows the widening changed (4/16 28672+4096, 2/8 28672+4096) against FlashQLA.
source .gpu/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/tlc12.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
echo "setup $((SECONDS - t0)) s"
TESTK="matches_oracle and not cp or cuda_graph_replay and not cp"
(
  export CUDA_VISIBLE_DEVICES=0
  AB_TESTS=1 AB_TEST_LABELS=fast AB_TEST_K="$TESTK" AB_BLOCK_V=plan AB_DEADLINE=400 \
    AB_MIXES=1x32768,8192x4,1024x8,16x512,7000+600+300+200+92 \
    bash bench_serving/kernel_ab.sh "$OUT/kab" tma=.work/ab12/kkt_solve_tma.py fast=.work/ab12/kkt_solve_fast.py \
    > "$OUT/kab.log" 2>&1
  echo "gpu0 kab rc=$? $((SECONDS - t0)) s"
) &
(
  export CUDA_VISIBLE_DEVICES=1
  timeout 120 python3 .work/ab12/breakdown.py "$OUT/breakdown.json" 16/32:8192x4 16/32:1x32768 2/8:1x32768 16/32:1024x8 \
    > "$OUT/breakdown.log" 2>&1
  echo "gpu1 breakdown rc=$? $((SECONDS - t0)) s"
  AB_TESTS=1 AB_TEST_LABELS=tma AB_TEST_K="$TESTK" AB_BLOCK_V= AB_DEADLINE=200 \
    bash bench_serving/kernel_ab.sh "$OUT/kab-tma-tests" tma=.work/ab12/kkt_solve_tma.py > "$OUT/kab-tma-tests.log" 2>&1
  echo "gpu1 tma tests rc=$? $((SECONDS - t0)) s"
  timeout $(( 420 - (SECONDS - t0) )) python3 bench_serving/kernels.py --heads 4/16,2/8 --mixes 28672+4096 \
    --backends qla,flashqla --budget-s $(( 380 - (SECONDS - t0) )) --out "$OUT/cp-widen" > "$OUT/cp-widen.log" 2>&1
  echo "gpu1 cp-widen rc=$? $((SECONDS - t0)) s"
  # ncu of the "fast" kkt (and the walk) at 16/32 8192x4, from a copy of the package with it
  SITE=/tmp/site-fast; rm -rf $SITE && mkdir -p $SITE && cp -r qla_serve tests bench_serving $SITE/ \
    && cp -r kernels $SITE/qla_serve/kernels && cp -r integrations $SITE/qla_serve/integrations \
    && cp .work/ab12/kkt_solve_fast.py $SITE/qla_serve/kernels/hopper/kkt_solve.py
  left=$(( 440 - (SECONDS - t0) ))
  [ $left -gt 60 ] && (cd $SITE && PYTHONPATH=$SITE:$PYTHONPATH timeout $left bash bench_serving/ncu_walk.sh "$OUT/ncu-fast" > "$OUT/ncu-fast.log" 2>&1)
  echo "gpu1 ncu rc=$? $((SECONDS - t0)) s"
) &
wait
cat "$OUT/kab/ab.md" 2>/dev/null | head -16
grep -h "passed\|failed" "$OUT"/kab/tests-*.log "$OUT"/kab-tma-tests/tests-*.log 2>/dev/null | tail -2
python3 - "$OUT" <<'PY'
import json, sys, glob
o = sys.argv[1]
for f in sorted(glob.glob(o + "/kab/*-bvplan/kernels.json")):
    rows = json.load(open(f))["rows"]
    print(f.split("/")[-2], [(r["heads"], "x".join(map(str, r["seqlens"]))[:14], round(r.get("qla_ms") or 0, 3), round(r.get("qla_kkt_only_ms") or 0, 3), round(r.get("qla_gpu_ms") or 0, 3)) for r in rows])
try:
    for r in json.load(open(o + "/breakdown.json")):
        print(r["heads"], r["mix"], {k: {n[:28]: round(u) for n, u in list(v.items())[:5]} for k, v in r.items() if isinstance(v, dict)})
except Exception as e: print("breakdown", e)
PY
grep "^| " "$OUT/cp-widen/kernels.md" 2>/dev/null | head -5
cd "$OUT" && tar -czf /tmp/all.tar.gz . && rm -rf ./* && mv /tmp/all.tar.gz "$OUT/all.tar.gz"
