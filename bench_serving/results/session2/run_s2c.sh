#!/usr/bin/env bash
set -u
T0=$(date +%s)
source .gpu/prelude.sh
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100
export TILELANG_CACHE_DIR=$PWD/.gpu-cache/cache; mkdir -p $TILELANG_CACHE_DIR
python3 -m pip install -q --no-deps --no-build-isolation -e . > $OUT/pip.log 2>&1
for m in gva1 graph short-kv; do for i in new old; do
  (timeout 150 python3 .tlcache/diag.py $m $i > $OUT/d_${m}_$i.log 2>&1; echo "rc=$? $m $i" >> $OUT/rc.txt) &
done; done
(timeout 200 python3 bench_serving/gpu_prebuild.py --processes 8 --heads 16/32,2/8 --no-tests > $OUT/prebuild.log 2>&1) &
wait
echo "diag $(( $(date +%s) - T0 ))s" >> $OUT/rc.txt
timeout $(( 430 - ($(date +%s) - T0) )) python3 .tlcache/diag.py speed new > $OUT/speed.log 2>&1; echo "speed rc=$? $(( $(date +%s) - T0 ))s" >> $OUT/rc.txt
cat $OUT/rc.txt; grep -h '"step"' $OUT/d_*.log $OUT/speed.log | cut -c1-400; tail -5 $OUT/speed.log | cut -c1-300
