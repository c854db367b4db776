# Session 54: how many DRAM bytes each kernel of one prefill call moves, and at what share of the
# GPU's DRAM bandwidth (Nsight Compute, clocks left alone), QLA against FlashQLA on the same rows and
# inputs (bench_serving/walk_once.py: kernel_bench.py's inputs, the cached "kernel" path, the last of
# three calls profiled). Question: are the rows issue 3 (a) misses on an H100 (64×128) bound by DRAM
# bandwidth, and by how much do QLA's bytes differ from FlashQLA's? Run it after the table calls on
# the same machine (FlashQLA's JIT kernels are then in the cache). Carry .gpu and the kernel tar.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
END=${CALL_END:-400}
mkdir -p $OUT/bytes
for spec in ${BYTES_SPECS:-"qla,16/32,64x128" "flashqla,16/32,64x128" "qla,16/64,64x128" "flashqla,16/64,64x128" \
             "qla,16/64,16384+16384" "flashqla,16/64,16384+16384" "qla,16/32,8192x4" "flashqla,16/32,8192x4" \
             "qla,16/32,1x32768" "flashqla,16/32,1x32768"}; do
  IFS=, read -r be heads mix <<< "$spec"
  left=$(( END - (SECONDS - t0) - 15 ))
  [ $left -gt 30 ] || { echo "skip $spec: ${left}s left"; continue; }
  tag="$be-${heads/\//-}-$mix"
  timeout -k 5 $(( left < 120 ? left : 120 )) ncu --clock-control none --nvtx --nvtx-include "profile/" \
    --section SpeedOfLight --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
    --print-units base --csv \
    python3 bench_serving/walk_once.py --backend $be --heads $heads --mix $mix --calls 3 \
    > $OUT/bytes/$tag.csv 2> $OUT/bytes/$tag.log
  echo "$tag rc=$? $((SECONDS - t0)) s: $(grep -c '"dram__bytes_read.sum"' $OUT/bytes/$tag.csv) kernels"
done
compiled_here
finish
echo "call $((SECONDS - t0)) s"
