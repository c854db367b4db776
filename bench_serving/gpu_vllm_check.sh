#!/usr/bin/env bash
# H200 check of the vLLM plugin (vLLM 0.26.0 from the .gpu-vllm pack; see ../shared/gpu/README.md).
#
#   source .gpu-vllm/prelude.sh && bash bench_serving/gpu_vllm_check.sh [gpu_vllm_check.py args]
#
# 1. registers qla-serve in the pack's Python (entry points: the `qla` vLLM plugin);
# 2. writes a Qwen3-Next-shaped model folder (config + tokenizer; `--load-format dummy` weights):
#    hidden 2048, GDN 16/32 heads K=V=128, full attention every 4th layer, MoE top-10 of 64
#    experts (512 in the real model; reduced for load time), 8 layers;
# 3. serves it with `--gdn-prefill-backend triton` and with `--attention-backend qla`, sends the
#    same greedy prompts (1..8192 tokens, and a concurrent mixed batch), compares tokens and
#    logprobs, and writes $OUT/gpu_vllm_check.json plus both server logs.
#
# Extra args go to gpu_vllm_check.py, e.g. `--no-eager` (CUDA graphs + torch.compile; slower start),
# `--prefix-caching`, `--ref flashinfer`, `--qla-args "--gdn-prefill-backend qla"`.
# qla-serve on CUDA uses its TileLang kernels; where they refuse a call the layer falls back to
# vLLM's kernel (one log line; the JSON's qla_trace then counts only the calls qla-serve served).
# QLA_BACKEND=reference forces qla-serve's PyTorch reference instead (checks the adapter alone).
# Env: OUT (default bench_serving/results/gpu), TP (default 1; 2 on nvidia-h200-x2), WEIGHTS=random builds real random
# weights with tiny_model.py's recipe instead of dummy ones (slower; more decisive greedy margins).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/bench_serving/results/gpu}"
TP="${TP:-1}"
PY="${PYTHON:-python3}"
source "$ROOT/bench_serving/gpu_common.sh"

MODEL="${MODEL_ROOT:-$ROOT/.work}/qwen3-next-80b-8l"   # outside $OUT: weights never travel back

if [ "${WEIGHTS:-dummy}" = "random" ]; then
  "$PY" bench_serving/tiny_model.py "$MODEL-random" --preset qwen3-next-80b-8l
  warm "$MODEL-random"
  exec "$PY" bench_serving/gpu_vllm_check.py --model "$MODEL-random" --out "$OUT" --tp "$TP" --load-format auto "$@"
fi
"$PY" bench_serving/tiny_model.py "$MODEL" --preset qwen3-next-80b-8l --no-weights
warm "$MODEL"
exec "$PY" bench_serving/gpu_vllm_check.py --model "$MODEL" --out "$OUT" --tp "$TP" "$@"
