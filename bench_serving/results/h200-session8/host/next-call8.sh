#!/usr/bin/env bash
# Session 8, last call (fresh nvidia-h200; carry [".gpu", ".work/ab"]):
#   source .gpu/prelude.sh && bash .work/ab/next-call8.sh
# 1. the pinned staging ring's GPU tests; 2. host A/B of the ring (QLA_PINNED_RING=0/1, same
# process order twice); 3. CP + CUDA-graph + 1-token kernel tests on the ring.
set -uo pipefail
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
R=/tmp/res8; rm -rf $R; mkdir -p $R
T0=$SECONDS
pack() { tar -C /tmp -czf $OUT/res8.tar.gz res8; echo "packed at $((SECONDS-T0)) s"; }
trap pack EXIT
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/ab/tlcache.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > $R/pip.log 2>&1 || tail -3 $R/pip.log
timeout 40 python3 -m pytest -m gpu -p no:cacheprovider -rA tests/test_plan_gpu.py > $R/plan-tests.log 2>&1
echo "plan tests: $(tail -n 1 $R/plan-tests.log) at $((SECONDS-T0)) s"; pack
for rep in a b; do
  for ring in 0 1; do
    QLA_PINNED_RING=$ring timeout 40 python3 bench_serving/host_profile.py --heads 16/32,2/8 --mixes 1x8192,16x512,1024x8 \
      --out $R/host-ring$ring-$rep.json > $R/host-ring$ring-$rep.log 2>&1
    echo "ring=$ring $rep at $((SECONDS-T0)) s"; grep -o '"mix": "[^"]*", "heads": "[^"]*"\|"fresh": [0-9.]*\|"call": [0-9.]*\|"plan": [0-9.]*' $R/host-ring$ring-$rep.log | paste -sd' ' | cut -c1-600
  done
  pack
  [ $rep = a ] && { QLA_ERR_LOG=$R/errors.jsonl timeout 110 python3 -m pytest -m gpu -s -p no:cacheprovider -rA \
      -k "cp_prefill or cuda_graph or single-tokens" tests/test_hopper_gpu.py > $R/tests.log 2>&1
    echo "kernel tests: $(tail -n 1 $R/tests.log) at $((SECONDS-T0)) s"; pack; }
done
