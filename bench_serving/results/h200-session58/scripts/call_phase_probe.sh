# Session 58, for the next lease (any H100 or H200): kkt_phase_probe.py, how one value head's serial
# work in kkt_solve divides between L, the diagonal inverses, the merges and the store; then (KKT_NCU=1,
# the default) kkt_solve's ncu source pages at 16/48 and 16/64 (8192×4): session 57 found 16/48's
# kkt_solve at 0.218 ms where 2 and 4 heads a CTA predict 0.186 (no spills: 128 registers, ptxas).
# Carry .gpu, .gpu-p/tlc58p.tar.xz (the eight probe kernels, built by `kkt_phase_probe.py
# --build-only` through gpu_cache_subset.sh) and .gpu-p/tlc58b.tar.xz (the table's kernels). ~4 min.
# Begin with `source .gpu/prelude.sh && `.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
timeout 240 python3 bench_serving/results/h200-session58/scripts/kkt_phase_probe.py --out $OUT/probe > $OUT/probe.log 2>&1
echo "probe rc=$? $((SECONDS - t0)) s"; grep -v TileLang $OUT/probe.log | tail -6
for heads in 16/48 16/64; do   # kkt_solve alone: full section set and source page (bench_serving/ncu_walk.sh)
  [ "${KKT_NCU:-1}" = 1 ] || break
  NCU_TIMEOUT=150 KERNELS=qla_kkt_solve bash bench_serving/ncu_walk.sh $OUT/ncu-${heads/\//-} $heads 8192x4 > /dev/null
  rm -f $OUT/ncu-${heads/\//-}/walk.ncu-rep
  echo "ncu $heads $((SECONDS - t0)) s"
  grep -E "Duration|DRAM Throughput|L1/TEX Cache Throughput|Issue Slots Busy" $OUT/ncu-${heads/\//-}/details.txt | sort -u
done
compiled_here
finish
echo "call $((SECONDS - t0)) s"
