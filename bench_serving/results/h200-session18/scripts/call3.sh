#!/bin/bash
# Session 18, second machine, call A: the tail-start CP overhead, profiled (tail_profile.py).
source .gpu-vllm-s/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/s18/tlcache.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
echo "setup $((SECONDS - t0)) s"
timeout -k 10 ${PROF_S:-240} python3 .work/s18/tail_profile.py > "$OUT/tail-profile.log" 2>&1
echo "profile rc=$? $((SECONDS - t0)) s"
grep "===" "$OUT/tail-profile.log"
