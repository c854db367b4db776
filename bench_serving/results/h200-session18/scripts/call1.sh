#!/bin/bash
# Session 18, call 1 (nvidia-h200, after uploading .gpu-vllm-s parts 00-06; carry part07 and .work/s18).
# Kernels built on the CPU machine travel as tlcache.tar.xz; what is missing (the CP tail-start
# kernels of variants not built there) is built here with 16 processes. Then the Hopper GPU tests
# (test_cp's tail-starts cases included: never run on a GPU), then issue 4's CP sweep on the issue's
# rows for 2/8 and 16/32, exact CP against tail starts (QLA_CP_TAIL=1), same inputs, same call.
source .gpu-vllm-s/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/s18/tlcache.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/env.txt"
python3 -c "import torch, tilelang, triton; print(torch.__version__, tilelang.__version__, triton.__version__)" >> "$OUT/env.txt" 2>&1
echo "setup $((SECONDS - t0)) s"
QLA_CP_TAIL=1 timeout -k 10 ${BUILD_S:-150} python3 bench_serving/gpu_prebuild.py --processes 16 --heads 16/32 \
  > "$OUT/prebuild.log" 2>&1
echo "prebuild rc=$? $((SECONDS - t0)) s: $(grep -c 'begins to compile' "$OUT/prebuild.log") kernels built here"
QLA_ERR_LOG=$OUT/errors.jsonl timeout -k 10 ${TEST_S:-220} python3 -m pytest -q -m gpu -rs \
  tests/test_hopper_gpu.py tests/test_conv.py tests/test_cp.py > "$OUT/gpu-tests.log" 2>&1
echo "gpu tests rc=$? $((SECONDS - t0)) s"; tail -n 4 "$OUT/gpu-tests.log"
grep -h "tail_starts" "$OUT/gpu-tests.log" | head -20
left=$(( ${CALL_S:-570} - (SECONDS - t0) ))
for mode in tail exact; do
  tail_env=0; [ $mode = tail ] && tail_env=1
  QLA_CP_TAIL=$tail_env timeout -k 10 $(( left / 2 - 5 )) python3 bench_serving/kernels.py --cp-sweep --heads 2/8,16/32 \
    --mixes 1x32768,1x16384,1x8192,28672+4096 --out "$OUT/cp-$mode" --budget-s $(( left / 2 - 40 )) > "$OUT/cp-$mode.log" 2>&1
  echo "cp sweep $mode rc=$? $((SECONDS - t0)) s"; grep "fit\|built" "$OUT/cp-$mode.log" | tail -2
done
# The tool returns at most 8 files: everything in one tar, the test log and errors beside it.
(cd "$OUT" && tar -czf /tmp/call1.tar.gz . && find . -mindepth 1 ! -name gpu-tests.log ! -name errors.jsonl -delete \
  && mv /tmp/call1.tar.gz .)
