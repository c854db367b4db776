#!/bin/bash
# Session 15, calls 2 and 3 (one H200, still warm after call 1: bundle and kernel cache in place).
# CHECK=1: first the vLLM greedy check with random weights against triton (the adapter now runs
# qla_serve.gdn_conv); then issue 7's matrix (preset h200, full shape) with $BACKENDS (serve.py's
# names, NAME@n = another server of NAME) in the time left, resumable in .work/bench-h200-gpu0.
source .gpu-vllm-s/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0 QLA_WARMUP=0
t0=$SECONDS
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
[ -d .work/qwen3-next-80b-8l-e512 ] || python3 bench_serving/tiny_model.py .work/qwen3-next-80b-8l-e512 \
  --preset qwen3-next-80b-8l-e512 --no-weights > "$OUT/prep.log" 2>&1
echo "setup $((SECONDS - t0)) s"
if [ "${CHECK:-0}" = 1 ]; then
  OUT=$OUT/check WEIGHTS=random timeout -k 20 --signal=INT ${CHECK_S:-330} \
    bash bench_serving/gpu_vllm_check.sh --ref triton --startup-timeout 300 > "$OUT/check.log" 2>&1
  echo "check rc=$? $((SECONDS - t0)) s"
  tail -n 15 "$OUT/check.log"
fi
left=$(( ${CALL_S:-560} - (SECONDS - t0) ))
if [ -n "${BACKENDS:-}" ] && [ $left -gt 150 ]; then
  PRESET=h200 SHAPES=full BACKENDS=$BACKENDS DEADLINE=$left RESULTS=$PWD/.work/bench-h200-gpu0 OUT=$OUT/m \
    bash bench_serving/run_h200.sh > "$OUT/m.log" 2>&1
  echo "matrix rc=$? $((SECONDS - t0)) s"
  f=$OUT/m/full/summary.md
  [ -f $f ] && sed -n '/| backend | workload | prefill steps/,/^$/p' $f
fi
