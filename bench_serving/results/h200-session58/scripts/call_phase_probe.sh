# Session 58, for the next lease (any H100 or H200): kkt_phase_probe.py, how one value head's serial
# work in kkt_solve divides between L, the diagonal inverses, the merges and the store; then (NCU=1,
# the default) kkt_solve's ncu source pages at 16/48 and 16/64 (8192×4): session 57 found 16/48's
# kkt_solve at 0.218 ms where 2 and 4 heads a CTA predict 0.186 (no spills: 128 registers, ptxas).
# Carry .gpu, .gpu-p/tlc58p.tar.xz (the eight probe kernels, built by `kkt_phase_probe.py
# --build-only` through gpu_cache_subset.sh) and .gpu-p/tlc58b.tar.xz (the table's kernels). ~4 min.
# Begin with `source .gpu/prelude.sh && `.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
timeout 240 python3 bench_serving/results/h200-session58/scripts/kkt_phase_probe.py --out $OUT/probe > $OUT/probe.log 2>&1
echo "probe rc=$? $((SECONDS - t0)) s"; grep -v TileLang $OUT/probe.log | tail -6
ncu_kkt() {   # heads: kkt_solve alone, full section set and source page (call_kkt6.sh's form)
  local tag=ncu-${1/\//-}
  mkdir -p $OUT/$tag
  QLA_CP=0 timeout -k 5 150 ncu --clock-control none --set full --import-source yes --nvtx --nvtx-include "profile/" \
    --kernel-name regex:qla_kkt_solve -f -o $OUT/$tag/kkt \
    python3 bench_serving/walk_once.py --heads $1 --mix 8192x4 --calls 3 > $OUT/$tag/ncu.log 2>&1
  echo "$tag rc=$? $((SECONDS - t0)) s"
  ncu --import $OUT/$tag/kkt.ncu-rep --page details --print-details all > $OUT/$tag/details.txt 2>&1
  ncu --import $OUT/$tag/kkt.ncu-rep --kernel-name qla_kkt_solve_kernel --page source --csv --print-source sass \
    2>&1 | gzip > $OUT/$tag/source-qla_kkt_solve.csv.gz
  rm -f $OUT/$tag/kkt.ncu-rep
  grep -E "Duration|DRAM Throughput|L1/TEX Cache Throughput|Issue Slots Busy" $OUT/$tag/details.txt | sort -u
}
if [ "${NCU:-1}" = 1 ]; then ncu_kkt 16/48; ncu_kkt 16/64; fi
compiled_here
finish
echo "call $((SECONDS - t0)) s"
