#!/bin/bash
# Session 9, last call (nvidia-h200-x2, .gpu-vllm uploaded by the calls before): vLLM prep for the
# check model only, then gpu_vllm_check.sh (qla vs triton, TP 1, random weights) on main with the
# persistent walk and the reused conv tables.
source .gpu-vllm-s/prelude.sh || exit 1
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/tlc9.tar.xz -C "$TILELANG_CACHE_DIR"
PREP_MODELS=check PREP_TP=1 PREP_PROCESSES=30 OUT="$OUT/prep" timeout 200 bash bench_serving/gpu_prep.sh > "$OUT/prep.log" 2>&1
echo "prep rc=$? $((SECONDS - t0)) s"
QLA_WARMUP=0 WEIGHTS=random OUT="$OUT/check" timeout -k 20 --signal=INT $((505 - SECONDS + t0)) \
  bash bench_serving/gpu_vllm_check.sh > "$OUT/check.log" 2>&1
echo "check rc=$? $((SECONDS - t0)) s"
tail -25 "$OUT/check.log"
ls "$OUT/check" 2>/dev/null
