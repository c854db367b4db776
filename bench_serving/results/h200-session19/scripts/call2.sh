#!/bin/bash
# Session 19, calls 2+ (same warm H200 as call 1: the bundle and the kernel cache are there).
# Issue 7's matrix (preset h200, full shape) for $BACKENDS, resumable in .work/bench-h200:
# `paired` = one qla server whose prefill steps alternate between qla-serve and vLLM's own path.
source .gpu-vllm-s/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0 QLA_WARMUP=0
t0=$SECONDS
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
echo "setup $((SECONDS - t0)) s"
left=$(( ${CALL_S:-570} - (SECONDS - t0) ))
PRESET=h200 SHAPES=full BACKENDS=$BACKENDS DEADLINE=$left RESULTS=$PWD/.work/bench-h200 OUT=$OUT/m \
  bash bench_serving/run_h200.sh > "$OUT/m.log" 2>&1
echo "matrix rc=$? $((SECONDS - t0)) s"
f=$OUT/m/full/summary.md
[ -f $f ] && sed -n '/## Paired/,/^## Same/p' $f | head -40
grep -h "healthy after\|TTFT p50" "$OUT/m.log" | tail -20
