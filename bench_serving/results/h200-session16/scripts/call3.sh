#!/bin/bash
# Session 16, call 3 (fresh H200 after uploading .gpu-vllm-s parts 00-06; carry part07 and .work/s16):
# the GPU kernel tests touched by the form cache (gates, oracle cases, CUDA graph, no compile after
# warm-up), then issue 7's matrix with $BACKENDS (preset h200, full shape).
source .gpu-vllm-s/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/s16/tlcache.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
echo "setup $((SECONDS - t0)) s"
QLA_ERR_LOG="$OUT/errors.jsonl" timeout 150 python3 -m pytest -m gpu -s -p no:cacheprovider -rA tests/test_hopper_gpu.py \
  -k "gate_inputs or matches_oracle or cuda_graph or no_compile or gating_kernel" > "$OUT/tests.log" 2>&1
echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 "$OUT/tests.log")"
if grep -q " passed" "$OUT/tests.log" && ! grep -q "failed\|error" "$OUT/tests.log"; then
  CALL_S=$(( ${CALL_S:-570} - (SECONDS - t0) )) bash .work/s16/call2.sh
else
  tail -n 30 "$OUT/tests.log"
fi
