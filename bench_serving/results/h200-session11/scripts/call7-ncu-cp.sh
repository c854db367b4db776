#!/bin/bash
# Session 11, call 7 (inline `run` command): ncu of the CP path (QLA_CP=1: the plan's split), 16/32 and 2/8 1x32768.
source .gpu/prelude.sh && export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
(CUDA_VISIBLE_DEVICES=0 QLA_CP=1 timeout 250 bash bench_serving/ncu_walk.sh $OUT/ncu-16-32-1x32768 16/32 1x32768 > $OUT/ncu0.txt 2>&1; echo rc0=$?) &
(CUDA_VISIBLE_DEVICES=1 QLA_CP=1 timeout 250 bash bench_serving/ncu_walk.sh $OUT/ncu-2-8-1x32768 2/8 1x32768 > $OUT/ncu1.txt 2>&1; echo rc1=$?) &
wait
