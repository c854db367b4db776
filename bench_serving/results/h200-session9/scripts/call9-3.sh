#!/bin/bash
# Session 9, call 3 (nvidia-h200-x2; carry .gpu, .work/tlc9.tar.xz, this script, the ablation files):
# GPU 0: QLA alone at forced V-blocks 64 then 128 on the 24 issue-3 rows (each non-CP row also
# times the other walk form): the data to refit the walk's cost model for the persistent form.
# GPU 1: Nsight Compute on 16/32 8192x4 (kkt_solve + walk), then the nowp / noout ablations.
source .gpu/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/tlc9.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
echo "setup $((SECONDS - t0)) s"
(
  for bv in 64 128; do
    CUDA_VISIBLE_DEVICES=0 QLA_BLOCK_V=$bv FLA_FLASH_QLA=0 timeout 260 python3 bench_serving/kernels.py \
      --heads 16/32,2/8 --backends qla --no-prewarm --budget-s 230 --out "$OUT/bv$bv" > "$OUT/bv$bv.log" 2>&1
    echo "bv$bv rc=$? $((SECONDS - t0)) s"
  done
) &
(
  CUDA_VISIBLE_DEVICES=1 timeout 240 bash bench_serving/ncu_walk.sh "$OUT/ncu" 16/32 8192x4 > "$OUT/ncu-run.log" 2>&1
  echo "ncu rc=$? $((SECONDS - t0)) s"
  CUDA_VISIBLE_DEVICES=1 AB_DEADLINE=$((540 - SECONDS + t0)) AB_TESTS=0 AB_BLOCK_V=plan AB_MIXES=1x32768,8192x4,1024x8,64x128 \
    bash bench_serving/kernel_ab.sh "$OUT/abl" nowp=.work/ab/abl9/nowp.py noout=.work/ab/abl9/noout.py > "$OUT/abl.log" 2>&1
  echo "abl rc=$? $((SECONDS - t0)) s"
) &
wait
cat "$OUT/abl/ab.md" 2>/dev/null | head -20
rm -f "$OUT/ncu/walk.ncu-rep"
tar -czf "$OUT/rest.tar.gz" -C "$OUT" ncu abl bv64 bv128 && ls -la "$OUT/rest.tar.gz"
grep -A 30 "two forms" "$OUT/bv64/kernels.md" | head -24
grep -A 30 "two forms" "$OUT/bv128/kernels.md" | head -24
