#!/bin/bash
# Session 11, call 4 (warm machine from call 3): issue 3's table for the other four head configs, two per
# GPU, kw walk (main 2c55bb6). Kernels compile here first (16 processes per GPU's share).
source .gpu/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
t0=$SECONDS
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
run() {  # gpu heads
  CUDA_VISIBLE_DEVICES=$1 python3 bench_serving/gpu_prebuild.py --no-tests --heads "$2" --block-v 64,128 --processes 16 > "$OUT/build-$1.log" 2>&1
  echo "gpu$1 build rc=$? $((SECONDS - t0)) s: $(tail -n 1 "$OUT/build-$1.log")"
  left=$((560 - (SECONDS - t0)))
  CUDA_VISIBLE_DEVICES=$1 timeout $left python3 bench_serving/kernels.py --heads "$2" \
    --backends qla,flashqla,fla --budget-s $((left - 40)) --out "$OUT/table-$1" > "$OUT/table-$1.log" 2>&1
  echo "gpu$1 table rc=$? $((SECONDS - t0)) s"
}
run 0 16/64,16/48 &
run 1 8/32,4/16 &
wait
for g in 0 1; do grep -A3 "^Targets" "$OUT/table-$g/kernels.md"; tail -3 "$OUT/table-$g.log"; done
tar -czf "$OUT/logs.tar.gz" -C "$OUT" build-0.log build-1.log table-0.log table-1.log pip.log && rm -f "$OUT"/*.log
