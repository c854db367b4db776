#!/bin/bash
# Next lease's kernel A/B (GPU_RUNBOOK "Next lease" item 1), nvidia-h200-x2 with the .gpu pack.
# Call 1: carry [".gpu"], command `true` (upload). Call 2: carry [".work/tlc10.tar.xz", ".work/ab10"],
# command `bash .work/ab10/call11-ab.sh`. GPU 0: timings of main, pready, async and kw at the plan's
# V-block; GPU 1: the GPU tests of main (the oracle's first GPU run), then of kw, pready and async
# (all cases each). kw = exp/kw-consumers (the consumers form W themselves, FlashInfer's form).
source .gpu/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/tlc10.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
echo "setup $((SECONDS - t0)) s"
(
  CUDA_VISIBLE_DEVICES=0 AB_TESTS=0 AB_DEADLINE=520 AB_BLOCK_V=plan \
    AB_MIXES=1x32768,8192x4,1024x8,64x128,16384+16384,16x512 \
    bash bench_serving/kernel_ab.sh "$OUT/kab" pready=.work/ab10/pready.py async=.work/ab10/async.py kw=.work/ab10/kw.py > "$OUT/kab.log" 2>&1
  echo "kab rc=$? $((SECONDS - t0)) s"
) &
(
  CUDA_VISIBLE_DEVICES=1 AB_TESTS=1 AB_TEST_TREE=1 AB_DEADLINE=530 AB_BLOCK_V= \
    bash bench_serving/kernel_ab.sh "$OUT/kab-tests" kw=.work/ab10/kw.py pready=.work/ab10/pready.py async=.work/ab10/async.py > "$OUT/kab-tests.log" 2>&1
  echo "kab tests rc=$? $((SECONDS - t0)) s"
) &
wait
cat "$OUT/kab/ab.md" 2>/dev/null | head -40; cat "$OUT/kab-tests.log"
tar -czf "$OUT/kab.tar.gz" -C "$OUT" kab kab-tests && rm -rf "$OUT/kab" "$OUT/kab-tests"
