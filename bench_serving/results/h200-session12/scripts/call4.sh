#!/bin/bash
# Session 12, call 4 (nvidia-h200-x2, .gpu pack): main (kkt_solve v3) on the other four head configs
# of issue 3's table (the CP rows of issue 4 at 8/32 and 4/16 among them), and ncu of v3.
# carry [".gpu", ".work/tlc14.tar.xz"]; command `bash .work/ab12/call4.sh`.
# GPU 0: ncu (kkt_solve + walk, 16/32 8192x4), then kernels.py --heads 16/64,16/48.
# GPU 1: kernels.py --heads 8/32,4/16.
source .gpu/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/tlc14.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
echo "setup $((SECONDS - t0)) s"
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 90 bash bench_serving/ncu_walk.sh "$OUT/ncu-v3" > "$OUT/ncu-v3.log" 2>&1
  echo "gpu0 ncu rc=$? $((SECONDS - t0)) s"
  timeout $(( 465 - (SECONDS - t0) )) python3 bench_serving/kernels.py --heads 16/64,16/48 --backends qla,flashqla,fla \
    --budget-s $(( 430 - (SECONDS - t0) )) --out "$OUT/table-16-64-48" > "$OUT/table-16-64-48.log" 2>&1
  echo "gpu0 table rc=$? $((SECONDS - t0)) s"
) &
(
  export CUDA_VISIBLE_DEVICES=1
  timeout $(( 465 - (SECONDS - t0) )) python3 bench_serving/kernels.py --heads 8/32,4/16 --backends qla,flashqla,fla \
    --budget-s $(( 430 - (SECONDS - t0) )) --out "$OUT/table-8-32-4-16" > "$OUT/table-8-32-4-16.log" 2>&1
  echo "gpu1 table rc=$? $((SECONDS - t0)) s"
) &
wait
grep -E "Duration|Achieved Occupancy|Warp Cycles Per Issued" "$OUT/ncu-v3/details.txt" 2>/dev/null | head -8
for t in table-16-64-48 table-8-32-4-16; do grep -A3 "^Targets" "$OUT/$t/kernels.md"; grep "^| " "$OUT/$t/kernels.md" | head -26 | cut -d'|' -f2-9; done
cd "$OUT" && tar -czf /tmp/all.tar.gz . && rm -rf ./* && mv /tmp/all.tar.gz "$OUT/all.tar.gz"
