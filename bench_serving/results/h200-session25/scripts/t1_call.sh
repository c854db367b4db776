#!/bin/bash
# Session 25 call T1 (second lease): the whole GPU test set (hopper + conv); a same-run QLA A/B of
# the CP widening's split-at-128 rows (the tree's rule against V-block 64 forced, i.e. the rule
# before 22c21f2, which walked them unsplit at 64); the same-run A/B of the walk's register split
# (session 23's 176/128/32 against 208/64/32) in what is left.
t0=$SECONDS
source .work/s25/common.sh
echo "setup $((SECONDS - t0)) s"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout -k 10 ${TEST_S:-270} python3 -m pytest -q -m gpu tests/test_hopper_gpu.py tests/test_conv.py -rs \
  -p no:cacheprovider > $OUT/gpu_tests.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s"; grep -E "passed|failed|error" $OUT/gpu_tests.log | tail -3
mkdir -p $OUT/wide
for lab in tree bv64; do
  for hm in "16/64,16/48 1x32768,1x16384,1x8192,28672+4096" "16/32,8/32 16384+16384" "4/16 8192x4"; do
    set -- $hm
    d=$OUT/wide/$lab-${1//[\/,]/-}
    env $([ $lab = bv64 ] && echo QLA_BLOCK_V=64) timeout -k 5 100 python3 bench_serving/kernels.py --backends qla --no-prewarm \
      --heads $1 --mixes $2 --out $d --budget-s 80 > $d.log 2>&1
    echo "wide $lab $1: rc=$? $((SECONDS - t0)) s"; grep "^\[bench\] [0-9]" $d.log | cut -c1-120
  done
done
left=$(( ${CALL_S:-585} - (SECONDS - t0) ))
if [ $left -gt 120 ]; then
  AB_TESTS=0 AB_HEADS=16/32,8/32 AB_MIXES=1x32768,28672+4096,8192x4 AB_BLOCK_V=plan AB_DEADLINE=$(( left - 10 )) \
    bash bench_serving/kernel_ab.sh $OUT/ab nreg176=.work/s25/nreg176.py > $OUT/ab.txt 2>&1
  echo "ab rc=$? $((SECONDS - t0)) s"; cat $OUT/ab/ab.md 2>/dev/null | head -30
fi
rm -rf $OUT/ab/site-*
