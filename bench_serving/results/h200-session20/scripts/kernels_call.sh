#!/bin/bash
# Session 20: issue 4's rows with the rule after session 19's lease (choose_parts counts only the
# long sequences), one kernels.py run per head config (QLA, FLA, FlashQLA, FlashInfer on the same
# inputs in each run), as session 19's calls 5-7.
source .gpu-vllm-s/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
t0=$SECONDS
if [ ! -f .work/s20-setup.done ]; then
  mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/s20/tlcache.tar.xz -C "$TILELANG_CACHE_DIR" && touch .work/s20-setup.done
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/env.txt"
echo "setup $((SECONDS - t0)) s"
for h in ${HEADS:-2/8 4/16 8/32 16/32}; do
  left=$(( ${CALL_S:-570} - (SECONDS - t0) ))
  [ $left -lt 60 ] && { echo "$h: not started, ${left}s left"; continue; }
  d=$OUT/k-${h/\//-}
  timeout -k 10 $left python3 bench_serving/kernels.py --heads $h --mixes 1x32768,1x16384,1x8192,28672+4096 \
    --out $d --budget-s $(( left - 30 )) > $d.log 2>&1
  echo "$h: rc=$? $((SECONDS - t0)) s"; grep "^\[bench\] [0-9]" $d.log | cut -c1-220
done
(cd "$OUT" && tar -czf /tmp/k.tar.gz . && find . -mindepth 1 ! -name k.tar.gz -delete && mv /tmp/k.tar.gz .)
