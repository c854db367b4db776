#!/usr/bin/env bash
# Where the walk kernel's time goes, from the hardware counters (Nsight Compute, on the H200):
#
#   bash bench_serving/ncu_walk.sh OUT [HEADS] [MIX]          # default 16/32 8192x4
#   BACKEND=flashinfer bash bench_serving/ncu_walk.sh OUT     # the same row through an anchor
#
# Profiles every kernel of the last of three calls (qla: kkt_solve and the fused walk; the first
# two calls load and warm them) of bench_serving/walk_once.py, selected by its NVTX range, with
# the full section set and source correlation (TileLang builds with -lineinfo), clocks left alone
# (--clock-control none, as METHOD.md asks). BACKEND (default qla) is any of kernel_bench.py's.
# Writes OUT/walk.ncu-rep and text pages beside it: details.txt (throughputs, occupancy, warp
# state statistics per kernel), raw.csv.gz (every metric) and source-<kernel>.csv.gz (per SASS
# line: instructions executed, warp stall samples by reason), which locate the stalls in the
# generated code (TileLang's device_kernel.cu in the kernel cache). Env: PYTHON, NCU (default
# ncu), QLA_CP / QLA_BLOCK_V as for kernel_bench.py (QLA_CP=0 is set here unless given: one walk, no CP
# phases), KERNELS (profile only kernels whose name matches this regex, e.g. qla_kkt_solve),
# NCU_TIMEOUT (seconds for the profiled run; the pages are still written from what it collected).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$(mkdir -p "${1:?usage: ncu_walk.sh OUT [HEADS] [MIX]}" && cd "$1" && pwd)"
HEADS="${2:-16/32}"
MIX="${3:-8192x4}"
NCU="${NCU:-ncu}"
export QLA_CP="${QLA_CP:-0}"
BACKEND="${BACKEND:-qla}"
${NCU_TIMEOUT:+timeout -k 5 "$NCU_TIMEOUT"} "$NCU" --clock-control none --set full --import-source yes \
  --nvtx --nvtx-include "profile/" ${KERNELS:+--kernel-name "regex:$KERNELS"} -f -o "$OUT/walk" \
  "${PYTHON:-python3}" "$ROOT/bench_serving/walk_once.py" --heads "$HEADS" --mix "$MIX" --calls 3 \
  --backend "$BACKEND" > "$OUT/ncu.log" 2>&1
echo "ncu rc=$? ($(tail -n 1 "$OUT/ncu.log"))"
"$NCU" --import "$OUT/walk.ncu-rep" --page details --print-details all > "$OUT/details.txt" 2>&1
# Every metric collected, per kernel (the warp-stall breakdown is smsp__pcsamp_warps_issue_stalled_*).
"$NCU" --import "$OUT/walk.ncu-rep" --page raw --csv 2>&1 | gzip > "$OUT/raw.csv.gz"
# One source page per kernel profiled, by its exact name: the regex qla_fused_fwd put both CP walk
# kernels in one CSV, each under its own header of a different width (session 42).
[ "$BACKEND" = qla ] && for k in $(grep -oE "^  qla_[a-z_]+_kernel" "$OUT/details.txt" | sort -u); do
  "$NCU" --import "$OUT/walk.ncu-rep" --kernel-name "$k" --page source --csv --print-source sass 2>&1 \
    | gzip > "$OUT/source-${k%_kernel}.csv.gz"
done
grep -E "^  [A-Za-z_]|Duration|Registers Per|Achieved Occupancy|Memory Throughput|Compute \(SM\) Throughput|DRAM Throughput|Stall|Warp Cycles Per Issued" \
  "$OUT/details.txt" | head -60
