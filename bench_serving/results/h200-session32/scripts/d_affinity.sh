# Session 32: is the table's process-to-process host variance (~40 %, up to 2x in c_host.sh's six runs)
# where the process runs? QLA-only kernels.py processes (same rows as c_teardown_ab.sh), pinned with
# taskset to the first two, the last two allowed CPUs, or unpinned, twice each; the GPU's NUMA/CPU
# affinity from nvidia-smi topo. Carry: .gpu-p/tlc26, tlc28, tlcab, tlc30b (.tar.xz).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
{ nvidia-smi topo -m; lscpu; grep Cpus_allowed_list /proc/self/status; } > $OUT/topo.txt 2>&1
grep -E "GPU0|NUMA node|Model name|^CPU\(s\)|Cpus_allowed" $OUT/topo.txt | head -n 12
cpus=$(python3 -c "import os; c=sorted(os.sched_getaffinity(0)); print(f'{c[0]},{c[1]} {c[-2]},{c[-1]}')")
for i in 1 2; do
  for set in $cpus all; do
    pin=(); [ "$set" != all ] && pin=(taskset -c "$set")
    "${pin[@]}" python3 bench_serving/kernels.py --backends qla --heads 16/32 --mixes 1x8192,16x512,1x16384,1x2048 \
      --no-prewarm --no-accuracy --no-agreement --out $OUT/aff-${set/,/_}-$i > $OUT/aff-${set/,/_}-$i.log 2>&1
    echo "cpus=$set run $i $((SECONDS - t0)) s; MHz now: $(grep MHz /proc/cpuinfo | awk '{s+=$4} END {printf "%.0f", s/NR}')"
    python3 -c "import json,sys; [print(' ', r['mix'], round(r['qla_serving_ms'],3), round(r['qla_gpu_ms'],3), {k[9:-3]: round(v) for k, v in r.items() if k.startswith('qla_host') and v}) for r in json.load(open(sys.argv[1]))['rows']]" $OUT/aff-${set/,/_}-$i/kernels.json
  done
done
finish
