#!/bin/bash
# Session 16, call 1 (nvidia-h200, after uploading .gpu-vllm-s parts 00-06; carry part07 and .work/s16).
# Kernels built on the CPU machine (build_local.sh) travel as tlcache.tar.xz. Then: the GPU kernel
# tests (gdn_prefill(gates=...): the gates in the l2norm pass), layer_profile.py (one vLLM GDN
# layer's core, host/GPU per piece; compare with session 15's), host_profile.py.
source .gpu-vllm-s/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/s16/tlcache.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
python3 -m pip install -q --no-deps --target .work/pyspy .work/s16/py_spy-*.whl >> "$OUT/pip.log" 2>&1
echo "setup $((SECONDS - t0)) s; py-spy: $(ls .work/pyspy/bin 2>&1)"
QLA_ERR_LOG="$OUT/errors.jsonl" timeout 200 python3 -m pytest -m gpu -s -p no:cacheprovider -rA \
  tests/test_hopper_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 "$OUT/tests.log")"
timeout 150 python3 bench_serving/layer_profile.py --heads 16/32,2/8 --out "$OUT/layer" > "$OUT/layer.log" 2>&1
echo "layer_profile rc=$? $((SECONDS - t0)) s"
timeout 60 python3 bench_serving/host_profile.py --heads 16/32 --mixes 1x8192,256x1+4096 --out "$OUT/host_profile.json" \
  > "$OUT/host_profile.log" 2>&1
echo "host_profile rc=$? $((SECONDS - t0)) s"
grep -h "passed\|failed\|Error" "$OUT/tests.log" | tail -n 8
grep -h "gates" "$OUT/tests.log" | head -8
cat "$OUT/layer/layer_profile.md" 2>/dev/null || tail -n 20 "$OUT/layer.log"
cat "$OUT/host_profile.log" | tail -4
cd "$OUT" && tar -czf /tmp/all.tar.gz . && rm -rf ./* && mv /tmp/all.tar.gz "$OUT/all.tar.gz"
