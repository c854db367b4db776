#!/bin/bash
# Session 19, call 3 (fresh nvidia-h200 after the parts upload; carry part07 and .work/s19): issue 4's
# rows against FlashQLA, FLA and FlashInfer in one kernels.py run, with tail starts the default for
# unit-norm keys and the refitted rule (wide_block_min_parts 2); then the tail-start profile and the
# GPU tests of the CP path under the new defaults.
source .gpu-vllm-s/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/s19/tlcache.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/env.txt"
echo "setup $((SECONDS - t0)) s"
timeout -k 10 ${BENCH_S:-330} python3 bench_serving/kernels.py --heads 2/8,4/16,8/32,16/32 \
  --mixes 1x32768,1x16384,1x8192,28672+4096 --out "$OUT/issue4" --budget-s $(( ${BENCH_S:-330} - 40 )) > "$OUT/issue4.log" 2>&1
echo "kernels rc=$? $((SECONDS - t0)) s"; grep "^\[bench\] [0-9]\|prewarm\|built\|accuracy" "$OUT/issue4.log" | cut -c1-200
timeout -k 10 ${PROF_S:-70} python3 .work/s19/tail_profile.py > "$OUT/tail-profile.log" 2>&1
echo "profile rc=$? $((SECONDS - t0)) s"; grep "===" "$OUT/tail-profile.log"
left=$(( ${CALL_S:-560} - (SECONDS - t0) ))
QLA_ERR_LOG=$OUT/errors.jsonl timeout -k 10 $(( left > 20 ? left - 10 : 10 )) python3 -m pytest -q -m gpu -rs \
  tests/test_cp.py tests/test_hopper_gpu.py -k "cp" > "$OUT/gpu-tests.log" 2>&1
echo "gpu tests rc=$? $((SECONDS - t0)) s"; tail -n 3 "$OUT/gpu-tests.log"
(cd "$OUT" && tar -czf /tmp/call3.tar.gz . && find . -mindepth 1 ! -name gpu-tests.log ! -name call3.tar.gz ! -name issue4.log -delete \
  && mv /tmp/call3.tar.gz .)
