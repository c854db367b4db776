#!/bin/bash
# Session 13, call 2 (nvidia-h200-x2, after uploading .gpu-vllm-s parts 00-05; carry part06,
# .work/tlc16.tar.xz, .work/ab13). Issue 7's matrix (preset h200: CUDA graphs, prefix caching on,
# the six workloads), full shape on both GPUs at once with the backends in opposite orders:
# GPU 0 qla, auto, triton; GPU 1 auto@2, qla@2, auto@3. Main with the vLLM adapter's one-call
# steps (a step's decodes ride in the qla-serve call as one-token sequences) and the step timer's
# host time per GDN core.
source .gpu-vllm-s/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0 QLA_WARMUP=0
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/tlc16.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
python3 bench_serving/tiny_model.py .work/qwen3-next-80b-8l-e512 --preset qwen3-next-80b-8l-e512 --no-weights > "$OUT/prep.log" 2>&1
python3 -m qla_serve.cli warmup --heads 16/32 --engine vllm --pool-dtype bf16 --processes 30 > "$OUT/warmup.log" 2>&1
echo "setup rc=$? $((SECONDS - t0)) s"; tail -2 "$OUT/warmup.log"
OUT="$OUT" STAGE_S=$(( ${CALL_S:-565} - (SECONDS - t0) )) GPU0_BACKENDS=${GPU0_BACKENDS:-qla,auto,triton} \
  GPU1_BACKENDS=${GPU1_BACKENDS:-auto@2,qla@2,auto@3} GPU1_SHAPE=full MATRIX_ARGS="${MATRIX_ARGS:-}" \
  bash bench_serving/h200_x2.sh matrix
echo "matrix rc=$? $((SECONDS - t0)) s"
cat "$OUT/matrix.txt" | grep -v "^\s*$" | tail -n 40
