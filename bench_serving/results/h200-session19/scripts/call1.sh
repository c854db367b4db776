#!/bin/bash
# Session 19, call 1 (nvidia-h200, after uploading .gpu-vllm-s parts 00-06; carry part07 and .work/s19).
# Kernel cache built on the CPU machine (tlcache.tar.xz). The GPU tests of the tail-start pieces never
# run on a GPU (cp_tail's scan, the combine's tail form) and the tail-start CP cases, then issue 4's
# CP sweep with tail starts (QLA_CP_TAIL=1; V-blocks 64 and 128, for the refit) and without (the
# plan's V-block), same inputs, same call; do_bench and GPU-busy ms per row.
source .gpu-vllm-s/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/s19/tlcache.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/env.txt"
python3 -c "import torch, tilelang, triton; print(torch.__version__, tilelang.__version__, triton.__version__)" >> "$OUT/env.txt" 2>&1
echo "setup $((SECONDS - t0)) s"
QLA_ERR_LOG=$OUT/errors.jsonl timeout -k 10 ${TEST_S:-120} python3 -m pytest -q -m gpu -rs \
  tests/test_hopper_gpu.py tests/test_cp.py -k "tail" > "$OUT/gpu-tests.log" 2>&1
echo "gpu tests rc=$? $((SECONDS - t0)) s: $(grep -c 'begins to compile' "$OUT/gpu-tests.log") kernels built"; tail -n 3 "$OUT/gpu-tests.log"
MIXES=1x32768,1x16384,1x8192,28672+4096,1x4096
left=$(( ${CALL_S:-575} - (SECONDS - t0) ))
QLA_CP_TAIL=1 timeout -k 10 $(( left * 2 / 3 )) python3 bench_serving/kernels.py --cp-sweep --heads 2/8,16/32,4/16,8/32 \
  --mixes $MIXES --cp-block-v 64,128 --out "$OUT/cp-tail" --budget-s $(( left * 2 / 3 - 30 )) > "$OUT/cp-tail.log" 2>&1
echo "cp sweep tail rc=$? $((SECONDS - t0)) s"; grep "fit\|built" "$OUT/cp-tail.log" | tail -2
left=$(( ${CALL_S:-575} - (SECONDS - t0) ))
QLA_CP_TAIL=0 timeout -k 10 $(( left - 5 )) python3 bench_serving/kernels.py --cp-sweep --heads 2/8,16/32,4/16,8/32 \
  --mixes $MIXES --cp-parts 1,2,4,8,16 --out "$OUT/cp-exact" --budget-s $(( left - 40 )) > "$OUT/cp-exact.log" 2>&1
echo "cp sweep exact rc=$? $((SECONDS - t0)) s"; grep "fit\|built\|budget" "$OUT/cp-exact.log" | tail -3
(cd "$OUT" && tar -czf /tmp/call1.tar.gz . && find . -mindepth 1 ! -name gpu-tests.log ! -name errors.jsonl -delete \
  && mv /tmp/call1.tar.gz .)
