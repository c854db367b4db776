#!/bin/bash
# Session 9, call 2 (nvidia-h200-x2; carry .gpu, .work/tlc9.tar.xz, .work/ab): GPU 0: issue 3's table
# (QLA against FlashQLA and FLA, heads 16/32 and 2/8, both walk forms per row); GPU 1: kernel A/B of
# kkt_solve with tf32 merge products (GPU tests of the candidate, then QLA on four mixes per label).
source .gpu/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/tlc9.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
echo "setup $((SECONDS - t0)) s"
(
  CUDA_VISIBLE_DEVICES=0 FLA_FLASH_QLA=0 timeout 545 python3 bench_serving/kernels.py --heads 16/32,2/8 \
    --backends qla,flashqla,fla --budget-s 470 --out "$OUT/table" > "$OUT/table.log" 2>&1
  echo "table rc=$? $((SECONDS - t0)) s"
) &
(
  CUDA_VISIBLE_DEVICES=1 AB_DEADLINE=530 AB_BLOCK_V=plan AB_TEST_K="matches_oracle or walk_forms or cuda_graph_replay" \
    AB_MIXES=1x32768,8192x4,1024x8,64x128 bash bench_serving/kernel_ab.sh "$OUT/kab" tf32=.work/ab/kkt_solve_tf32.py \
    > "$OUT/kab.log" 2>&1
  echo "kab rc=$? $((SECONDS - t0)) s"
) &
wait
tail -5 "$OUT/kab.log"; grep -h "passed\|failed" "$OUT"/kab/tests-*.log | tail -3
tar -czf "$OUT/kab.tar.gz" -C "$OUT" kab && rm -rf "$OUT/kab"
cat "$OUT/table/kernels.md" 2>/dev/null | head -60 || tail -30 "$OUT/table.log"
