#!/bin/bash
# The next lease's kernel call (GPU_RUNBOOK "Next lease" items 1, 1b, 3), nvidia-h200-x2, .gpu pack.
# One call: carry [".gpu", ".work/tlc11.tar.xz", ".work/ab11"] (44 + 8.8 + the tree's ~8.5 MiB < 64),
# command `bash bench_serving/results/h200-session11/scripts/next-lease-kernels.sh` (timeout_s 600).
# (If the tree has grown past ~12 MiB, upload .gpu first in a `true` call of its own.)
# GPU 0: every GPU test (the early CP cases included), then issue 4's rows with the session-11 plan
#        (CP refit + V-block widening) against FlashQLA and FLA.
# GPU 1: exp/consumer-async and exp/consumer-async2 against main (kernel_ab.sh: casync2's GPU tests,
#        casync2 being a superset of casync's change, then the V-block-64 rows for all three), then
#        QLA_CP_EARLY at 0.67 and 0.6 against off on 16/32's rows it applies to (P = 2; 8/32's kernels
#        are not in the carried cache).
# Not run yet: every duration below is an estimate.
source .gpu/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
t0=$SECONDS
left() { echo $(( 560 - (SECONDS - t0) )); }
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/tlc11.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
echo "setup $((SECONDS - t0)) s"
(
  export CUDA_VISIBLE_DEVICES=0
  QLA_ERR_LOG="$OUT/errors-main.jsonl" timeout 240 python3 -m pytest -m gpu -s -p no:cacheprovider -rA \
    tests/test_hopper_gpu.py > "$OUT/gpu-tests.log" 2>&1                          # ~130-180 s
  echo "gpu0 tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 "$OUT/gpu-tests.log")"
  timeout $(( $(left) - 5 )) python3 bench_serving/kernels.py --heads 2/8,4/16,8/32,16/32 \
    --mixes 1x32768,1x16384,1x8192,28672+4096 --backends qla,flashqla,fla --budget-s $(( $(left) - 40 )) \
    --out "$OUT/cp-rows" > "$OUT/cp-rows.log" 2>&1                               # 4/16, 8/32 compile here
  echo "gpu0 cp rows rc=$? $((SECONDS - t0)) s"
) &
(
  export CUDA_VISIBLE_DEVICES=1
  AB_TESTS=1 AB_TEST_LABELS=casync2 AB_BLOCK_V=plan AB_DEADLINE=380 \
    AB_MIXES=1x32768,16384+16384,1x8192,7000+600+300+200+92 \
    bash bench_serving/kernel_ab.sh "$OUT/kab" casync=.work/ab11/casync.py casync2=.work/ab11/casync2.py \
    > "$OUT/kab.log" 2>&1
  echo "gpu1 casync A/B rc=$? $((SECONDS - t0)) s"
  for share in 0.67 0.6 off; do
    [ "$(left)" -gt 45 ] || { echo "early $share: no time"; continue; }
    ( [ "$share" = off ] || export QLA_CP_EARLY=$share
      timeout $(( $(left) - 5 )) python3 bench_serving/kernels.py --heads 16/32 --mixes 1x32768,1x16384,1x8192 \
        --backends qla --budget-s 40 --out "$OUT/early-$share" > "$OUT/early-$share.log" 2>&1 )
    echo "early $share rc=$? $((SECONDS - t0)) s"
  done
) &
wait
tail -n 3 "$OUT/gpu-tests.log"; grep -A3 "^Targets" "$OUT/cp-rows/kernels.md"; cat "$OUT/kab/ab.md" 2>/dev/null | head -20
for s in 0.67 0.6 off; do echo "early $s:"; grep "^| 16/32" "$OUT/early-$s/kernels.md" 2>/dev/null | head -3; done
# At most 8 files come back: everything in one tarball.
cd "$OUT" && tar -czf /tmp/all.tar.gz . && rm -rf ./* && mv /tmp/all.tar.gz "$OUT/all.tar.gz"
