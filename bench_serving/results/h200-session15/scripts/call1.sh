#!/bin/bash
# Session 15, call 1 (nvidia-h200, one GPU, after uploading .gpu-vllm-s parts 00-06; carry part07 and
# .work/s15). The kernels were built on the CPU machine (build_local.sh: sm_90a, nvcc only) and travel
# as tlcache.tar.xz into the bundle's TILELANG_CACHE_DIR (kept while the machine stays warm). Then:
# tests/test_conv.py + tests/test_hopper_gpu.py (the new gdn_conv kernel; kkt_solve on the plan's
# chunk_bounds); bench_serving/layer_profile.py (one vLLM GDN layer's core, host/GPU per piece, both
# convs); kernels.py --backends qla on contiguous inputs (session 14's rows, same inputs).
source .gpu-vllm-s/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/s15/tlcache.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
echo "setup $((SECONDS - t0)) s"
QLA_ERR_LOG="$OUT/errors.jsonl" timeout 240 python3 -m pytest -m gpu -s -p no:cacheprovider -rA \
  tests/test_conv.py tests/test_hopper_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 "$OUT/tests.log")"
timeout 150 python3 bench_serving/layer_profile.py --out "$OUT/layer" > "$OUT/layer.log" 2>&1
echo "layer_profile rc=$? $((SECONDS - t0)) s"
left=$(( ${CALL_S:-560} - (SECONDS - t0) ))
MIXES=1x32768,1x8192,8192x4,16384+16384,1024x8,7000+600+300+200+92,1x2048
[ $left -gt 40 ] && QLA_BENCH_INPUTS=contiguous timeout $left python3 bench_serving/kernels.py --backends qla \
  --heads 16/32,2/8 --mixes $MIXES --budget-s $(( left - 15 )) --out "$OUT/b-contiguous" > "$OUT/b-contiguous.log" 2>&1
echo "bench rc=$? $((SECONDS - t0)) s"
grep -h "passed\|failed\|Error" "$OUT/tests.log" | tail -n 8
grep -h "^conv \|rel diff" "$OUT/tests.log" | head -20
cat "$OUT/layer/layer_profile.md" 2>/dev/null || tail -n 20 "$OUT/layer.log"
python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
try:
    rows = json.load(open(os.path.join(out, "b-contiguous", "kernels.json")))["rows"]
except Exception as e:
    rows = []; print("no bench rows", e)
for r in rows:
    print(r.get("heads"), r.get("mix") or r.get("seqlens"), "qla gpu ms", r.get("qla_gpu_ms"), "wall", r.get("qla_ms"))
PY
ls "$TILELANG_CACHE_DIR" | wc -l
cd "$OUT" && tar -czf /tmp/all.tar.gz . && rm -rf ./* && mv /tmp/all.tar.gz "$OUT/all.tar.gz"
