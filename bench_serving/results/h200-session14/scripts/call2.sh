#!/bin/bash
# Session 14, calls 2 and 3 (nvidia-h200-x2, the machine still warm after call 1: the bundle and
# TileLang's cache are there). Issue 7's matrix (preset h200: CUDA graphs, prefix caching on, the
# six workloads), full shape on both GPUs at once, backends in GPU0_BACKENDS / GPU1_BACKENDS
# (serve.py's names; NAME@n = another server of NAME). Main with the vLLM adapter on views of its
# conv output (gdn_gating + the op's l2norm pass instead of vLLM's fused_post_conv_prep).
source .gpu-vllm-s/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0 QLA_WARMUP=0
t0=$SECONDS
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
[ -d .work/qwen3-next-80b-8l-e512 ] || python3 bench_serving/tiny_model.py .work/qwen3-next-80b-8l-e512 \
  --preset qwen3-next-80b-8l-e512 --no-weights > "$OUT/prep.log" 2>&1
# loads from the cache call 1 filled; builds (32 processes) on a fresh machine
python3 -m qla_serve.cli warmup --heads 16/32 --engine vllm --pool-dtype bf16 --processes 32 > "$OUT/warmup.log" 2>&1
echo "setup rc=$? $((SECONDS - t0)) s"; tail -2 "$OUT/warmup.log"
OUT="$OUT" STAGE_S=$(( ${CALL_S:-565} - (SECONDS - t0) )) GPU0_BACKENDS=${GPU0_BACKENDS:-qla,auto,triton} \
  GPU1_BACKENDS=${GPU1_BACKENDS:-auto@2,qla@2,triton@2} GPU1_SHAPE=full MATRIX_ARGS="${MATRIX_ARGS:-}" \
  bash bench_serving/h200_x2.sh matrix
echo "matrix rc=$? $((SECONDS - t0)) s"
cat "$OUT/matrix.txt" | grep -v "^\s*$" | tail -n 40
