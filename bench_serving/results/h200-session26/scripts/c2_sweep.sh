#!/bin/bash
# Session 26 call C2: CP sweeps the width rule leaves unmeasured: 16/48 and 16/64 long rows at both
# V-blocks, P up to 8 (V-block 128's splits there need more than one wave of CTAs).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh
echo "setup $((SECONDS - t0)) s"
left=$(( ${CALL_S:-585} - (SECONDS - t0) ))
timeout -k 5 $(( left - 15 )) python3 bench_serving/kernels.py --cp-sweep --heads ${HEADS:-16/48,16/64} \
  --mixes ${MIXES:-1x32768,28672+4096,1x16384,1x8192,8192x4,16384+16384} --cp-parts ${PARTS:-1,2,3,4,6,7,8} \
  --cp-block-v 64,128 --out $OUT/sweep --budget-s $(( left - 30 )) > $OUT/sweep.log 2>&1
echo "sweep rc=$? $((SECONDS - t0)) s"; grep -E "^\[cp-sweep\]" $OUT/sweep.log | tail -60 | cut -c1-160
finish
