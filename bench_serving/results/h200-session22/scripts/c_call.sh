#!/bin/bash
# Session 22 call C: issue 4's rows (QLA, FLA, FlashQLA, FlashInfer on the same inputs) under the CP
# rule the sweep of call B chose (QLA_CP_ANY_COUNT from its fit), one kernels.py run per head group.
source .gpu-vllm-s/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
export QLA_CP_ANY_COUNT=${QLA_CP_ANY_COUNT:-$(cat .work/s22-dev/any_count 2>/dev/null || echo 0)}
t0=$SECONDS
if [ ! -f .work/s22-setup.done ]; then
  mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/s22/tlcache.tar.xz -C "$TILELANG_CACHE_DIR" && touch .work/s22-setup.done
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/env.txt"
echo "setup $((SECONDS - t0)) s, QLA_CP_ANY_COUNT=$QLA_CP_ANY_COUNT"
for h in ${HEADS:-8/32,16/32 2/8,4/16}; do
  left=$(( ${CALL_S:-575} - (SECONDS - t0) ))
  [ $left -lt 120 ] && { echo "$h: not started, ${left}s left"; continue; }
  d=$OUT/k-${h//[\/,]/-}
  timeout -k 10 $left python3 bench_serving/kernels.py --heads $h --mixes 1x32768,1x16384,1x8192,28672+4096 \
    --out $d --budget-s $(( left - 30 )) > $d.log 2>&1
  echo "$h: rc=$? $((SECONDS - t0)) s"; grep "^\[bench\] [0-9]" $d.log | cut -c1-220
done
(cd "$OUT" && tar -czf /tmp/k.tar.gz . && find . -mindepth 1 ! -name k.tar.gz -delete && mv /tmp/k.tar.gz .)
