#!/bin/bash
# Session 10, call 1 (nvidia-h200-x2, after uploading .gpu-vllm-s parts 00-05; carry part06,
# .work/tlc10.tar.xz, .work/ab10). Setup: the kernel cache built on the CPU machine, the two
# config-only models, vLLM-adapter variants loaded. Then GPU 0: issue 7's matrix, full shape;
# GPU 1: kernel A/B of exp/wgp-p-ready and exp/wgp-async against main (timings first, then the
# GPU tests of both on a subset), then the matrix's tp8rank shape. Later calls resume both
# matrices with `h200_x2.sh matrix` (same RESULTS folders).
source .gpu-vllm-s/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0 QLA_WARMUP=0
t0=$SECONDS
STAGE_S=${STAGE_S:-545}
left() { echo $((STAGE_S - SECONDS + t0)); }
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/tlc10.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
for p in qwen3-next-80b-8l-e512 qwen3-next-80b-8l-e512-tp8rank; do
  python3 bench_serving/tiny_model.py ".work/$p" --preset "$p" --no-weights >> "$OUT/prep.log" 2>&1
done
python3 -m qla_serve.cli warmup --heads 16/32 --heads 2/8 --engine vllm --pool-dtype bf16 --processes 30 > "$OUT/warmup.log" 2>&1
echo "setup rc=$? $((SECONDS - t0)) s"; tail -2 "$OUT/warmup.log"
S="$OUT/call1"; mkdir -p "$S"
GPU0_BACKENDS=${GPU0_BACKENDS:-qla,auto,triton,qla@2,auto@2}
GPU1_BACKENDS=${GPU1_BACKENDS:-qla,auto,triton,auto@2,qla-nocp}
AB_TEST_K="walk_forms or cp_prefill or cuda_graph_replay or single-tokens or gva1-fp32"
matrix() {  # GPU shape backends
  CUDA_VISIBLE_DEVICES=$1 PRESET=h200 SHAPES=$2 BACKENDS=$3 DEADLINE=$(( $(left) - 20 )) \
    RESULTS="$PWD/.work/bench-h200-gpu$1" OUT="$S/matrix-gpu$1" bash bench_serving/run_h200.sh > "$S/matrix-gpu$1.log" 2>&1
  echo "matrix gpu$1 rc=$? $((SECONDS - t0)) s"
}
matrix 0 full "$GPU0_BACKENDS" &
(
  CUDA_VISIBLE_DEVICES=1 AB_TESTS=0 AB_DEADLINE=210 AB_BLOCK_V=plan AB_MIXES=1x32768,8192x4,1024x8,64x128 \
    bash bench_serving/kernel_ab.sh "$S/kab" pready=.work/ab10/pready.py async=.work/ab10/async.py > "$S/kab.log" 2>&1
  echo "kab rc=$? $((SECONDS - t0)) s"
  CUDA_VISIBLE_DEVICES=1 AB_TESTS=1 AB_TEST_K="$AB_TEST_K" AB_DEADLINE=230 AB_BLOCK_V= \
    bash bench_serving/kernel_ab.sh "$S/kab-tests" pready=.work/ab10/pready.py async=.work/ab10/async.py > "$S/kab-tests.log" 2>&1
  echo "kab tests rc=$? $((SECONDS - t0)) s"
  matrix 1 tp8rank "$GPU1_BACKENDS"
) &
wait
cat "$S/kab/ab.md" 2>/dev/null; cat "$S/kab-tests.log" 2>/dev/null | tail -4
tail -3 "$S"/matrix-gpu*.log
tar -czf "$OUT/call1.tar.gz" -C "$OUT" call1 && rm -rf "$S"
