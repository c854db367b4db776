#!/bin/bash
# Session 12, call 5 (nvidia-h200-x2, .gpu pack): measurements for the next session, no code change.
# carry [".gpu", ".work/tlc14.tar.xz", ".work/ab12"]; command `bash .work/ab12/call5.sh`.
# GPU 0: host_profile.py on CP and non-CP rows (this host's plan / CP tables / glue / launches),
#        then two rows off the CP rule: 16/48 28672+4096 with P = 2, 2/8 1x16384 at V-block 64 / P = 8.
# GPU 1: FlashQLA's per-kernel GPU time (breakdown.py), 16/32 8192x4 and 1x32768.
source .gpu/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/tlc14.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
echo "setup $((SECONDS - t0)) s"
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 70 python3 bench_serving/host_profile.py --heads 16/32,2/8 --mixes 1x32768,1x8192,8192x4,1024x8 \
    --out "$OUT/host.json" > "$OUT/host.log" 2>&1
  echo "gpu0 host rc=$? $((SECONDS - t0)) s"
  QLA_CP_PARTS=2 timeout 50 python3 bench_serving/kernels.py --backends qla --heads 16/48 --mixes 28672+4096 \
    --budget-s 30 --out "$OUT/cp2-16-48" > "$OUT/cp2-16-48.log" 2>&1
  echo "gpu0 16/48 P2 rc=$? $((SECONDS - t0)) s"
  QLA_BLOCK_V=64 QLA_CP_PARTS=8 timeout 50 python3 bench_serving/kernels.py --backends qla --heads 2/8 --mixes 1x16384 \
    --budget-s 30 --out "$OUT/bv64p8-2-8" > "$OUT/bv64p8-2-8.log" 2>&1
  echo "gpu0 2/8 64/8 rc=$? $((SECONDS - t0)) s"
) &
(
  export CUDA_VISIBLE_DEVICES=1
  timeout 175 python3 .work/ab12/breakdown.py "$OUT/breakdown.json" 16/32:8192x4 16/32:1x32768 > "$OUT/breakdown.log" 2>&1
  echo "gpu1 breakdown rc=$? $((SECONDS - t0)) s"
) &
wait
grep '^{' "$OUT/host.log"
for d in cp2-16-48 bv64p8-2-8; do grep "^| " "$OUT/$d/kernels.md" 2>/dev/null | sed -n 3p | cut -d'|' -f2-5,9; done
python3 -c "
import json
for r in json.load(open('$OUT/breakdown.json')):
    print(r['heads'], r['mix'], {k: {n[:34]: round(u) for n, u in v.items()} for k, v in r.items() if isinstance(v, dict)})
" 2>&1 | tail -4
cd "$OUT" && tar -czf /tmp/all.tar.gz . && rm -rf ./* && mv /tmp/all.tar.gz "$OUT/all.tar.gz"
