#!/bin/bash
# Session 9, call 1 (nvidia-h200-x2; carry .gpu, .work/tlc9.tar.xz, this script):
# GPU 0: the Hopper GPU tests on the persistent walk; GPU 1: QLA alone on the issue-3 rows at 16/32
# and 2/8, both walk forms per row (kernels.py's same-run A/B).
source .gpu/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/tlc9.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
{ nvidia-smi; nproc; python3 -c "import torch, tilelang; print(torch.__version__, tilelang.__version__)"; } > "$OUT/env.txt" 2>&1
echo "setup $((SECONDS - t0)) s"
(
  CUDA_VISIBLE_DEVICES=0 QLA_ERR_LOG=$OUT/gpu-test-errors.jsonl timeout 500 \
    python3 -m pytest -m gpu -s -q tests/test_hopper_gpu.py > "$OUT/gpu-tests.log" 2>&1
  echo "tests rc=$? $((SECONDS - t0)) s"
) &
(
  CUDA_VISIBLE_DEVICES=1 FLA_FLASH_QLA=0 timeout 520 python3 bench_serving/kernels.py --heads 16/32,2/8 \
    --backends qla --budget-s 440 --out "$OUT/ab" > "$OUT/ab.log" 2>&1
  echo "bench rc=$? $((SECONDS - t0)) s"
) &
wait
tail -4 "$OUT/gpu-tests.log"
grep -E "FAILED|Error" "$OUT/gpu-tests.log" | head -20
tail -32 "$OUT/ab/kernels.md" 2>/dev/null || tail -20 "$OUT/ab.log"
