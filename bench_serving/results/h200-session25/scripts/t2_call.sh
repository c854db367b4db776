#!/bin/bash
# Session 25 calls T2 / T3: issue 3's table (kernels.py: QLA, FLA, FlashQLA in one run, all twelve
# mixes) for the head configs in $HEADS (one kernels.py run).
t0=$SECONDS
source .work/s25/common.sh
echo "setup $((SECONDS - t0)) s"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
left=$(( ${CALL_S:-585} - (SECONDS - t0) ))
d=$OUT/t-${HEADS//[\/,]/-}
timeout -k 10 $left python3 bench_serving/kernels.py --heads $HEADS --backends qla,flashqla,fla \
  --out $d --budget-s $(( left - 45 )) > $d.log 2>&1
echo "$HEADS: rc=$? $((SECONDS - t0)) s"; grep "^\[bench\]" $d.log | cut -c1-200 | tail -45
