#!/usr/bin/env bash
# Issue 7 on the H200: the serving latency matrix, qla vs vLLM's own GDN prefill backends.
#
#   source .gpu-vllm/prelude.sh && bash bench_serving/run_h200.sh [serve.py args...]
#
# For each model shape in $SHAPES (config + tokenizer only: `--load-format dummy`, no downloads):
#   full     Qwen3-Next-80B per-layer shapes: hidden 2048, GDN 16/32 heads K=V=128, full attention
#            every 4th layer, MoE 512 experts top-10 (512 wide) + shared expert; 8 layers instead
#            of 48 (6 GDN + 2 attention; 48 x 512 experts is ~155 GB of bf16, more than one H200)
#   tp8rank  one rank of the same model at TP 8: GDN 2/8 heads, attention 2/1 heads, MoE 64 wide
# runs bench_serving/serve.py --preset h200 (prompts 2K/8K/32K at concurrency 1; mixed-length
# streams at 4 and 16; a prefix-reuse stream at 16) for backends qla, auto (= FlashInfer on sm_90),
# triton, CUDA graphs on (EAGER=1 adds --enforce-eager), one server per backend with prefix caching
# on for every workload (ONE_SERVER=0: prefix caching only for the prefix stream, twice the starts).
#
# The device tool stops a command at 600 s: the runner gets DEADLINE (default 540) seconds, then is
# interrupted (its server stopped by PID). Results are resumable: cells already in results.json are
# skipped, so run the same command again until it prints "matrix complete". They live in
# $RESULTS (default .work/bench-h200, git-ignored, kept while the machine stays warm; on a fresh
# machine pass `carry: [".work/bench-h200"]` after copying the last call's files there) and are
# copied to $OUT after every call: $OUT/<shape>/{results.json,summary.md,*.png,server-*.log}.
# Env: SHAPES (default "full tp8rank"), BACKENDS (default qla,auto,triton), TP (default 1),
# PRESET (default h200; h200-quick = the same kinds of workload with fewer requests, eager, for one
# short lease: see bench_serving/GPU_RUNBOOK.md), QLA_WARMUP=0 (skip compiling qla-serve's TileLang
# variants up front: gpu_prep.sh did), TILELANG_CACHE_DIR, PYTHON.
# What comes back fits the device tool's limit of 8 files: $OUT/env.txt, $OUT/qla-serve-info.txt,
# $OUT/<shape>/{summary.md,results.json} and $OUT/bench-h200.tar.gz (everything, plots and logs).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TP="${TP:-1}"
PY="${PYTHON:-python3}"
RESULTS="${RESULTS:-$ROOT/.work/bench-h200}"
OUT="${OUT:-$RESULTS}"
SHAPES="${SHAPES:-full tp8rank}"
BACKENDS="${BACKENDS:-qla,auto,triton}"
DEADLINE="${DEADLINE:-540}"
PRESET="${PRESET:-h200}"
export VLLM_USE_FLASHINFER_SAMPLER=0   # avoids a sampler JIT at start-up
# TileLang's kernel cache inside the checkout (git-ignored): a cache built beforehand without a GPU
# (`qla-serve warmup --config .work/<preset>/config.json --pool-dtype bf16 --compile-only`, with the
# same variable set) can travel with `carry: [".work/tilelang-cache"]` and saves the cold compile.
export TILELANG_CACHE_DIR="${TILELANG_CACHE_DIR:-$ROOT/.work/tilelang-cache}"
T_END=$((SECONDS + DEADLINE))
source "$ROOT/bench_serving/gpu_common.sh"

copy_back() {
  [ "$(cd "$OUT" && pwd)" = "$(cd "$RESULTS" 2>/dev/null && pwd)" ] && return 0
  for d in "$RESULTS"/*/; do
    [ -d "$d" ] || continue
    mkdir -p "$OUT/$(basename "$d")"
    cp "$d"/results.json "$d"/summary.md "$OUT/$(basename "$d")/" 2>/dev/null || true
  done
  # Plots, server logs and step traces in one file (the device tool returns at most 8 files).
  tar -C "$RESULTS" -czf "$OUT/bench-h200.tar.gz" . 2>/dev/null || true
}
trap copy_back EXIT

args=(--preset "$PRESET" --backends "$BACKENDS")
[ "${ONE_SERVER:-1}" = 1 ] && args+=(--one-server)
[ "${EAGER:-0}" = 1 ] && args+=(--eager)
[ "$TP" != 1 ] && args+=(--tp "$TP")
complete=1
for shape in $SHAPES; do
  case "$shape" in
    full) preset=qwen3-next-80b-8l-e512 ;;
    tp8rank) preset=qwen3-next-80b-8l-e512-tp8rank ;;
    *) echo "unknown shape $shape (full, tp8rank)" >&2; exit 2 ;;
  esac
  MODEL="$ROOT/.work/$preset"          # outside $OUT: nothing large travels back
  shape_out="$RESULTS/$shape"; [ "$PRESET" = h200 ] || shape_out="$RESULTS/$shape-$PRESET"
  "$PY" bench_serving/tiny_model.py "$MODEL" --preset "$preset" --no-weights
  left=$((T_END - SECONDS))
  if [ "$left" -lt 120 ]; then complete=0; echo "[$shape] not started: ${left}s left; run again"; continue; fi
  warm "$MODEL"
  left=$((T_END - SECONDS))
  echo "[$shape] serve.py with ${left}s left"
  if ! timeout -k 30 --signal=INT "$left" "$PY" bench_serving/serve.py "${args[@]}" --model "$MODEL" \
       --out "$shape_out" "$@"; then
    complete=0; echo "[$shape] incomplete (deadline or failed requests): run again to resume"
  fi
done
[ "$complete" = 1 ] && echo "matrix complete" || echo "matrix incomplete: run the same command again"
