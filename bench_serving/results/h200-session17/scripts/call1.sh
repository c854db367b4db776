#!/bin/bash
# Session 17, call 1 (nvidia-h200, after uploading .gpu-vllm-s parts 00-06; carry part07 and .work/s17).
# The vLLM adapter's kernels, built on the CPU machine, travel as tlcache.tar.xz. Then the vLLM
# greedy check with random weights against triton on the adapter's gates= path (not run since
# session 15), then issue 7's matrix (call2.sh) with what is left of the call.
source .gpu-vllm-s/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/s17/tlcache.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
echo "setup $((SECONDS - t0)) s"
OUT=$OUT/check WEIGHTS=random timeout -k 20 --signal=INT ${CHECK_S:-330} \
  bash bench_serving/gpu_vllm_check.sh --ref triton --startup-timeout 300 > "$OUT/check.log" 2>&1
echo "check rc=$? $((SECONDS - t0)) s"
tail -n 12 "$OUT/check.log"
CALL_S=$(( ${CALL_S:-570} - (SECONDS - t0) )) bash .work/s17/call2.sh
