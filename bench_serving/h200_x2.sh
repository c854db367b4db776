#!/usr/bin/env bash
# Issues 3–7 on one lent nvidia-h200-x2 (two H200s): each stage is one `run` call and keeps both
# GPUs busy with independent jobs (GPU_RUNBOOK.md, "Plan C"). After the six .gpu-vllm uploads:
#
#   source .gpu-vllm/prelude.sh && bash bench_serving/h200_x2.sh prep     # carry part05 + .gpu-sglang
#   source .gpu-vllm/prelude.sh && bash bench_serving/h200_x2.sh tp1      # vLLM TP-1 check ∥ kernel table, part A
#   source .gpu-vllm/prelude.sh && bash bench_serving/h200_x2.sh tp2      # vLLM TP-2 check (both GPUs)
#   source .gpu-vllm/prelude.sh && bash bench_serving/h200_x2.sh serve    # serving matrix ∥ kernel table, part B + CP sweep
#   source .gpu-vllm/prelude.sh && bash bench_serving/h200_x2.sh graphs   # vLLM check with CUDA graphs + prefix caching
#
#   prep   GPU build of every TileLang variant the later stages hit (engine adapters, the GPU tests,
#          the kernel bench; two pools side by side), the check's random-weight model; then
#          GPU 0: SGLang adapter test (issue 6) ∥ GPU 1: tests/test_hopper_gpu.py (issue 3); with
#          AB_ALTS="label=fused_fwd.py ..." both GPUs then A/B those kernels (kernel_ab.sh).
#   tp1    GPU 0: gpu_vllm_check.sh, qla vs --gdn-prefill-backend triton and flashinfer (issue 5)
#          ∥ GPU 1: kernel_bench.py, heads 16/32, 8/32, 16/64 (issue 3's table, part A).
#   tp2    gpu_vllm_check.sh --tp 2 vs triton (issue 5).
#   serve  GPU 0: run_h200.sh full shape, h200-quick (issue 7) ∥ GPU 1: kernel_bench.py, heads 2/8,
#          4/16, 16/48 (part B), then the CP sweep (issue 4) with what time is left.
#   graphs gpu_vllm_check.sh --no-eager --prefix-caching, qla on GPU 1 beside triton on GPU 0
#          (both start at once: torch.compile + CUDA-graph capture; issue 5's graphs and "align").
#   matrix issue 7's matrix, one shape per GPU at once: GPU 0 runs GPU0_SHAPE (default full),
#          GPU 1 GPU1_SHAPE (default tp8rank), preset MATRIX_PRESET (default h200: CUDA graphs on),
#          each resumable in its own .work/bench-h200-gpuN, backends GPUN_BACKENDS (default
#          $BACKENDS, else qla,auto,triton; serve.py's names, NAME@2 = a second server of NAME); a
#          GPU whose matrix is complete then runs GPUN_AFTER (a command, given $GPU_LEFT seconds and
#          $S) with the time left.
#
# Every job gets a deadline below the device tool's 600 s; at the end the stage's folder is packed
# into $OUT/<stage>.tar.gz (the tool returns at most 8 files) beside a short $OUT/<stage>.txt.
# `python3 bench_serving/kernel_bench.py --merge A/kernels.json B/kernels.json --out DIR` joins the two
# table parts afterwards. Env: STAGE_S (default 540) = the stage's deadline in seconds; for `serve`
# also SHAPES (default full), MATRIX_ARGS and GPU1_CMD (see the stage); for `prep` PREP_TESTS=0
# (builds only: no GPU tests, no SGLang test) and PREP_MODELS (gpu_prep.sh's).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
stage="${1:?usage: h200_x2.sh prep|tp1|tp2|serve|graphs|matrix}"
OUT="${OUT:-$ROOT/.work/x2}"
S="$OUT/$stage"
mkdir -p "$S"
PY="${PYTHON:-python3}"
T_END=$((SECONDS + ${STAGE_S:-540}))
left() { echo $((T_END - SECONDS)); }
# One kernel-cache key everywhere: builds, tests, bench and the vLLM servers (TileLang keys its
# disk cache on the target string; "auto" and the named H100 target are different keys).
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0 QLA_WARMUP=0

pack() {
  { echo "# $stage $(date -u +%FT%TZ), $((SECONDS)) s"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    tail -n 25 "$S"/*.log 2>/dev/null; } > "$OUT/$stage.txt" 2>&1
  tar -C "$OUT" -czf "$OUT/$stage.tar.gz" "$stage" && rm -rf "$S"
}
trap pack EXIT

case "$stage" in
prep)
  "$PY" -m pip install -q --no-deps --no-build-isolation -e . > "$S/pip.log" 2>&1 || tail -3 "$S/pip.log"
  # Engine variants + the check's model (gpu_prep.sh) beside the tests' and the bench's variants.
  ( QLA_WARMUP=1 PREP_PROCESSES=16 OUT="$S/gpu-prep" timeout $(( $(left) - 200 )) bash bench_serving/gpu_prep.sh ) > "$S/prep.log" 2>&1 &
  p1=$!
  timeout $(( $(left) - 200 )) "$PY" bench_serving/gpu_prebuild.py --processes 16 --block-v 64,128 > "$S/prebuild.log" 2>&1 &
  p2=$!
  # AB_ALTS="label=file ...": alternative walk kernels (kernel_ab.sh) built beside the rest, then
  # timed against the checkout on both GPUs once their first jobs end: plan's V-block on GPU 0,
  # forced 128 on GPU 1 (each column of the comparison comes from one GPU); ratios to label AB_REF.
  # AB_TESTS=1 (AB_TEST_K="…" selects cases) also runs the GPU tests on each alternative, on GPU 0.
  [ -n "${AB_ALTS:-}" ] && AB_BUILD_ONLY=1 AB_TESTS="${AB_TESTS:-0}" AB_SKIP_TREE=1 AB_PROCESSES=6 timeout $(( $(left) - 200 )) \
    bash bench_serving/kernel_ab.sh "$S/ab-build" $AB_ALTS > "$S/ab-build.log" 2>&1
  wait $p2; wait $p1
  echo "builds done at $SECONDS s" >> "$S/prep.log"
  [ "${PREP_TESTS:-1}" = 0 ] && exit 0
  ( CUDA_VISIBLE_DEVICES=0 OUT="$S/sglang" SGLANG_TEST_TIMEOUT=$(( $(left) - 15 )) bash tests/sglang/run_gpu.sh
    [ -n "${AB_ALTS:-}" ] && CUDA_VISIBLE_DEVICES=0 AB_TESTS="${AB_TESTS:-0}" AB_BLOCK_V=plan AB_BASE="${AB_REF:-tree}-bvplan" AB_DEADLINE=$(( $(left) - 15 )) \
      bash bench_serving/kernel_ab.sh "$S/ab-gpu0" $AB_ALTS > "$S/ab-gpu0.log" 2>&1 ) > "$S/sglang.log" 2>&1 &
  CUDA_VISIBLE_DEVICES=1 QLA_ERR_LOG="$S/gpu-test-errors.jsonl" timeout $(( $(left) - 15 )) \
    "$PY" -m pytest -m gpu -s -p no:cacheprovider -rA tests/test_hopper_gpu.py > "$S/gpu-tests.log" 2>&1
  [ -n "${AB_ALTS:-}" ] && CUDA_VISIBLE_DEVICES=1 AB_TESTS=0 AB_BLOCK_V=128 AB_BASE="${AB_REF:-tree}-bv128" AB_DEADLINE=$(( $(left) - 15 )) \
    bash bench_serving/kernel_ab.sh "$S/ab-gpu1" $AB_ALTS > "$S/ab-gpu1.log" 2>&1
  wait
  ;;
tp1)
  ( CUDA_VISIBLE_DEVICES=0 OUT="$S/check" WEIGHTS=random timeout -k 20 --signal=INT $(( $(left) - 15 )) \
      bash bench_serving/gpu_vllm_check.sh --ref triton,flashinfer ) > "$S/check.log" 2>&1 &
  CUDA_VISIBLE_DEVICES=1 timeout -k 10 $(( $(left) - 10 )) "$PY" bench_serving/kernel_bench.py \
    --heads 16/32,8/32,16/64 --budget-s $(( $(left) - 90 )) --out "$S/kernels-a" > "$S/kernels-a.log" 2>&1
  wait
  ;;
tp2)
  OUT="$S/check" TP=2 WEIGHTS=random timeout -k 20 --signal=INT $(( $(left) - 10 )) \
    bash bench_serving/gpu_vllm_check.sh --ref triton > "$S/check.log" 2>&1
  ;;
serve)
  # MATRIX_ARGS go to run_h200.sh (e.g. --no-eager for CUDA graphs); GPU1_CMD replaces GPU 1's job
  # (e.g. a kernel A/B writing under $S), given the seconds left as $GPU1_LEFT.
  ( CUDA_VISIBLE_DEVICES=0 PRESET=h200-quick SHAPES="${SHAPES:-full}" DEADLINE=$(( $(left) - 20 )) OUT="$S/matrix" \
      bash bench_serving/run_h200.sh ${MATRIX_ARGS:-} ) > "$S/matrix.log" 2>&1 &
  if [ -n "${GPU1_CMD:-}" ]; then
    CUDA_VISIBLE_DEVICES=1 GPU1_LEFT=$(( $(left) - 20 )) S="$S" timeout -k 10 $(( $(left) - 10 )) \
      bash -c "$GPU1_CMD" > "$S/gpu1.log" 2>&1
  else
    CUDA_VISIBLE_DEVICES=1 timeout -k 10 $(( $(left) - 150 )) "$PY" bench_serving/kernel_bench.py \
      --heads 2/8,4/16,16/48 --budget-s $(( $(left) - 240 )) --out "$S/kernels-b" > "$S/kernels-b.log" 2>&1
    CUDA_VISIBLE_DEVICES=1 timeout -k 10 $(( $(left) - 10 )) "$PY" bench_serving/kernel_bench.py --cp-sweep \
      --heads 16/32,2/8 --cp-block-v 64 --budget-s $(( $(left) - 40 )) --out "$S/cp-sweep" > "$S/cp-sweep.log" 2>&1
  fi
  wait
  ;;
graphs)
  OUT="$S/check" WEIGHTS=random timeout -k 20 --signal=INT $(( $(left) - 10 )) \
    bash bench_serving/gpu_vllm_check.sh --ref triton --no-eager --prefix-caching --startup-timeout $(( $(left) - 120 )) \
    > "$S/check.log" 2>&1
  ;;
matrix)
  one_gpu() {  # $1 = GPU index, $2 = shape, $3 = follow-up command, $4 = backends
    local log="$S/matrix-gpu$1.log"
    CUDA_VISIBLE_DEVICES=$1 PRESET="${MATRIX_PRESET:-h200}" SHAPES="$2" BACKENDS="$4" DEADLINE=$(( $(left) - 20 )) \
      RESULTS="$ROOT/.work/bench-h200-gpu$1" OUT="$S/matrix-gpu$1" bash bench_serving/run_h200.sh ${MATRIX_ARGS:-} > "$log" 2>&1
    if grep -q "^matrix complete" "$log" && [ -n "$3" ] && [ "$(left)" -gt 60 ]; then
      echo "after-job at $SECONDS s: $3" >> "$log"
      CUDA_VISIBLE_DEVICES=$1 GPU_LEFT=$(( $(left) - 20 )) S="$S" timeout -k 10 $(( $(left) - 10 )) \
        bash -c "$3" > "$S/after-gpu$1.log" 2>&1
    fi
  }
  one_gpu 0 "${GPU0_SHAPE:-full}" "${GPU0_AFTER:-}" "${GPU0_BACKENDS:-${BACKENDS:-qla,auto,triton}}" &
  one_gpu 1 "${GPU1_SHAPE:-tp8rank}" "${GPU1_AFTER:-}" "${GPU1_BACKENDS:-${BACKENDS:-qla,auto,triton}}"
  wait
  ;;
*) echo "unknown stage $stage (prep, tp1, tp2, serve, graphs, matrix)" >&2; exit 2 ;;
esac
