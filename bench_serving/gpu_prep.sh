#!/usr/bin/env bash
# One-time H200 preparation for the runbook (bench_serving/GPU_RUNBOOK.md), run in the same call
# that uploads the last .gpu-vllm part:
#
#   source .gpu-vllm/prelude.sh && bash bench_serving/gpu_prep.sh
#
# 1. registers qla-serve in the pack's Python (gpu_common.sh; $OUT/env.txt);
# 2. builds, in .work/ (git-ignored; kept on the device while the machine stays warm), the model
#    folders the later calls use: the check's Qwen3-Next-shaped model with real random weights
#    (WEIGHTS=random of gpu_vllm_check.sh, ~3.4 GB) and the matrix's config-only
#    qwen3-next-80b-8l-e512 and -tp8rank (--load-format dummy);
# 3. compiles every TileLang variant those calls hit, all in ONE pool of one build process per
#    core (16 on the H200), into $TILELANG_CACHE_DIR (the prelude points it at .gpu-vllm/): vLLM's
#    adapter (contiguous q/k/v, has_initial_state, no in-kernel l2norm; fp32 and bf16 pools; BV 64
#    and 128) for heads 16/32 (TP 1), 8/16 (TP 2) and 2/8 (TP-8 rank), and SGLang's adapter
#    (packed qkv, in-kernel l2norm, no has_initial_state) for 2/8 (tests/sglang/test_sglang_gpu.py).
#    The random-weight model is built in the background meanwhile.
#
# Idempotent: a model folder with its marker is reused; a cached kernel is a 0.4 s load.
# Env: PREP_MODELS (default "check full tp8rank"), PREP_TP (default "1 2"), QLA_WARMUP=0 skips 3,
# PREP_PROCESSES (default: one per core).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/.work/gpu-prep}"
TP=1
PY="${PYTHON:-python3}"
T0=$SECONDS
source "$ROOT/bench_serving/gpu_common.sh"
"$PY" -m qla_serve.cli info 2>&1 | tee "$OUT/qla-serve-info.txt" | tail -6 || true

declare -A PRESET_OF=([check]=qwen3-next-80b-8l [full]=qwen3-next-80b-8l-e512 [tp8rank]=qwen3-next-80b-8l-e512-tp8rank)
bg=""
for m in ${PREP_MODELS:-check full tp8rank}; do
  p="${PRESET_OF[$m]}"
  if [ "$m" = check ]; then     # real weights: slow, so in the background while the kernels build
    ( t=$SECONDS; "$PY" bench_serving/tiny_model.py ".work/$p-random" --preset "$p" > "$OUT/prep-model-check.log" 2>&1 \
        && echo "model .work/$p-random ready in $((SECONDS - t)) s" || { echo "model build FAILED:"; tail -20 "$OUT/prep-model-check.log"; exit 1; } ) &
    bg=$!
  else
    "$PY" bench_serving/tiny_model.py ".work/$p" --preset "$p" --no-weights
  fi
done

if [ "${QLA_WARMUP:-1}" = 1 ]; then
  t=$SECONDS
  # The CLI, not a stdin script: the build pool spawns workers, which re-import the main module.
  heads=()
  for tp in ${PREP_TP:-1 2}; do heads+=(--heads "$((16 / tp))/$((32 / tp))"); done
  procs="${PREP_PROCESSES:-$(nproc)}"
  if "$PY" -m qla_serve.cli warmup "${heads[@]}" --heads 2/8 --engine vllm --processes "$procs" > "$OUT/prep-warmup.log" 2>&1 \
     && "$PY" -m qla_serve.cli warmup --heads 2/8 --engine sglang --processes "$procs" >> "$OUT/prep-warmup.log" 2>&1; then
    grep -E "variants ready|warm-up done" "$OUT/prep-warmup.log" || true
  else
    tail -5 "$OUT/prep-warmup.log"; echo "warm-up FAILED (kernels will compile on first use)"
  fi
  echo "warm-up: $((SECONDS - t)) s"
fi
[ -z "$bg" ] || wait "$bg"
echo "gpu_prep done in $((SECONDS - T0)) s"
