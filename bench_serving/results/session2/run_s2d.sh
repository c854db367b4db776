#!/usr/bin/env bash
set -u
T0=$(date +%s)
source .gpu/prelude.sh
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100
export TILELANG_CACHE_DIR=$PWD/.gpu-cache/cache; mkdir -p $TILELANG_CACHE_DIR
python3 -m pip install -q --no-deps --no-build-isolation -e . > $OUT/pip.log 2>&1
timeout 95 python3 bench_serving/gpu_prebuild.py --processes 16 --heads 2/8 > $OUT/prebuild.log 2>&1; echo "prebuild rc=$? $(( $(date +%s) - T0 ))s" >> $OUT/rc.txt
export QLA_ERR_LOG=$OUT/errs.jsonl
timeout $(( 240 - ($(date +%s) - T0) )) python3 -m pytest -q -s -p no:cacheprovider -m gpu tests/test_hopper_gpu.py -k "cp_prefill or cp_cuda or 32k or gva2-bf16 or gva8 or gva4 or gva1" > $OUT/pytest.log 2>&1; echo "pytest rc=$? $(( $(date +%s) - T0 ))s" >> $OUT/rc.txt
cat $OUT/rc.txt $OUT/errs.jsonl; grep -E "passed|failed|Error|assert" $OUT/pytest.log | tail -15
