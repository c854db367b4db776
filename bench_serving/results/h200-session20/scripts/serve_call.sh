#!/bin/bash
# Session 20: issue 7 matrix cells on a warm H200 (the bundle uploaded in parts 00-07).
# Setup once per machine (kernel cache built on the CPU machine, pip -e), then run_h200.sh for
# $SHAPES / $BACKENDS / $WORKLOADS (preset h200, CUDA graphs on), resumable in .work/bench-h200.
source .gpu-vllm-s/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0 QLA_WARMUP=0
t0=$SECONDS
if [ ! -f .work/s20-setup.done ]; then
  mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/s20/tlcache.tar.xz -C "$TILELANG_CACHE_DIR" && touch .work/s20-setup.done
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
echo "setup $((SECONDS - t0)) s"
for b in ${BACKENDS//;/ }; do
  left=$(( ${CALL_S:-570} - (SECONDS - t0) ))
  [ $left -lt 180 ] && { echo "$b: not started, ${left}s left"; continue; }
  PRESET=h200 SHAPES="${SHAPES:-full}" BACKENDS=$b DEADLINE=$left RESULTS=$PWD/.work/bench-h200 OUT=$OUT/m \
    bash bench_serving/run_h200.sh ${WORKLOADS:+--workloads $WORKLOADS} >> "$OUT/m.log" 2>&1
  echo "$b: rc=$? $((SECONDS - t0)) s"
done
for f in $OUT/m/*/summary.md; do [ -f $f ] && echo "== $f" && sed -n '/## Paired/,/^## Same/p' $f | head -30; done
grep -h "healthy after\|Traceback\|Error" "$OUT/m.log" | tail -12
