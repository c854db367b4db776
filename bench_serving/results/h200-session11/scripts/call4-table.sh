#!/bin/bash
# Session 11, call 3 (after a `true` call that uploads .gpu): issue 3's table with the kw walk (main
# 2c55bb6) on a quiet host. GPU 0: kernels.py heads 16/32, 2/8, all twelve mixes, qla/flashqla/fla.
# GPU 1: ncu of the walk and kkt_solve at 16/32 8192x4 (one single-threaded process beside it).
source .gpu/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/tlc10.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
echo "setup $((SECONDS - t0)) s; nproc $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg)"
(
  CUDA_VISIBLE_DEVICES=0 timeout 545 python3 bench_serving/kernels.py --heads 16/32,2/8 \
    --backends qla,flashqla,fla --budget-s 490 --out "$OUT/table" > "$OUT/table.log" 2>&1
  echo "table rc=$? $((SECONDS - t0)) s"
) &
(
  sleep 5
  CUDA_VISIBLE_DEVICES=1 timeout 400 bash bench_serving/ncu_walk.sh "$OUT/ncu" 16/32 8192x4 > "$OUT/ncu.txt" 2>&1
  echo "ncu rc=$? $((SECONDS - t0)) s; load $(cut -d' ' -f1-3 /proc/loadavg)"
) &
wait
tail -n 45 "$OUT/table/kernels.md" 2>/dev/null; tail -5 "$OUT/table.log"; cat "$OUT/ncu.txt"
rm -f "$OUT/ncu/walk.ncu-rep.bak"; tar -czf "$OUT/ncu.tar.gz" -C "$OUT" ncu && rm -rf "$OUT/ncu"
