#!/bin/bash
# Session 12, call 3 (nvidia-h200-x2, .gpu pack): main with kkt_solve v3 (fast math, bulk store,
# diagonal blocks scattered by all warps).
# carry [".gpu", ".work/tlc13.tar.xz", ".work/ab12"]; command `bash .work/ab12/call3.sh`.
# GPU 0: every GPU test; then kernel_ab: main against the previous kkt_solve (label old) on 16/32 and 2/8.
# GPU 1: issue 3's table for heads 16/32 and 2/8 (qla, flashqla, fla).
source .gpu/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/tlc13.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
echo "setup $((SECONDS - t0)) s"
(
  export CUDA_VISIBLE_DEVICES=0
  QLA_ERR_LOG="$OUT/errors-main.jsonl" timeout 260 python3 -m pytest -m gpu -s -p no:cacheprovider -rA \
    tests/test_hopper_gpu.py > "$OUT/gpu-tests.log" 2>&1
  echo "gpu0 tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 "$OUT/gpu-tests.log")"
  AB_TESTS=0 AB_BLOCK_V=plan AB_DEADLINE=$(( 500 - (SECONDS - t0) )) \
    AB_MIXES=1x32768,8192x4,16384+16384,1024x8,16x512,7000+600+300+200+92 \
    bash bench_serving/kernel_ab.sh "$OUT/kab" old=.work/ab12/kkt_solve_old.py > "$OUT/kab.log" 2>&1
  echo "gpu0 kab rc=$? $((SECONDS - t0)) s"
) &
(
  export CUDA_VISIBLE_DEVICES=1
  timeout $(( 505 - (SECONDS - t0) )) python3 bench_serving/kernels.py --heads 16/32,2/8 --backends qla,flashqla,fla \
    --budget-s $(( 470 - (SECONDS - t0) )) --out "$OUT/issue3-table" > "$OUT/issue3-table.log" 2>&1
  echo "gpu1 table rc=$? $((SECONDS - t0)) s"
) &
wait
tail -n 2 "$OUT/gpu-tests.log"; grep FAILED "$OUT/gpu-tests.log" | head
cat "$OUT/kab/ab.md" 2>/dev/null | head -18
grep -A3 "^Targets" "$OUT/issue3-table/kernels.md"
grep "^| " "$OUT/issue3-table/kernels.md" | head -28 | cut -d'|' -f2-9
cd "$OUT" && tar -czf /tmp/all.tar.gz . && rm -rf ./* && mv /tmp/all.tar.gz "$OUT/all.tar.gz"
