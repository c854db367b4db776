#!/bin/bash
# Session 26 call C8 (second lease): rows 02ff730's rule moves (the 16/48 long rows widened to V-block
# 128 with several waves of partitions, 16/64 28672+4096; the 7000-token prompt split from 96 chunks),
# QLA against FlashQLA and FLA in the same run. Kernel caches carried (QLA's, part of FlashQLA's).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh
echo "setup $((SECONDS - t0)) s"
end=$(( t0 + ${CALL_S:-220} ))
timeout -k 5 $(( end - SECONDS - 5 )) python3 bench_serving/kernels.py --heads 16/48 \
  --mixes 1x32768,1x16384,1x8192,28672+4096 --backends qla,flashqla,fla \
  --out $OUT/rows-a --budget-s $(( end - SECONDS - 40 )) > $OUT/rows-a.log 2>&1
echo "rows-a rc=$? $((SECONDS - t0)) s"; grep "^\[bench\]" $OUT/rows-a.log | cut -c1-170
left=$(( end - SECONDS ))
if [ $left -gt 60 ]; then
  timeout -k 5 $(( left - 5 )) python3 bench_serving/kernels.py --heads 16/32,8/32,4/16,2/8 \
    --mixes 7000+600+300+200+92 --backends qla,flashqla,fla --out $OUT/rows-b --budget-s $(( left - 40 )) > $OUT/rows-b.log 2>&1
  echo "rows-b rc=$? $((SECONDS - t0)) s"; grep "^\[bench\]" $OUT/rows-b.log | cut -c1-170
fi
finish
