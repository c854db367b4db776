#!/bin/bash
# Session 11, call 6 (warm machine after call 5, run inline as the `run` command): the CP sweep on the kw walk.
source .gpu/prelude.sh && export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0 && python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
(CUDA_VISIBLE_DEVICES=0 timeout 440 python3 bench_serving/kernels.py --cp-sweep --heads 16/32,2/8 --cp-block-v 64,128 --budget-s 400 --out $OUT/cp-0 > $OUT/cp-0.log 2>&1; echo gpu0 rc=$?) &
(CUDA_VISIBLE_DEVICES=1 timeout 440 python3 bench_serving/kernels.py --cp-sweep --heads 8/32,4/16 --cp-block-v 64,128 --budget-s 400 --out $OUT/cp-1 > $OUT/cp-1.log 2>&1; echo gpu1 rc=$?) &
wait; tail -n 25 $OUT/cp-0.log $OUT/cp-1.log
