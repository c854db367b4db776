#!/usr/bin/env bash
# Session 52's experiment kernels, rebuilt from their patches (h200-session52/patches/NAME.patch)
# into DIR/NAME.py (default .work/ab, git-ignored), where the call scripts read them: run it on the
# CPU machine before a call and carry DIR (the device gets the working tree without git history).
# Each patch is against kernels/hopper/kkt_solve.py or fused_fwd.py (main's, unchanged since
# session 43), but kkt_solve_series5's, which is against kkt_solve_series (MIN_BLOCKS = 5).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
P=bench_serving/results/h200-session52/patches
D=${1:-.work/ab}
mkdir -p "$D"
for p in $P/*.patch; do
  n=$(basename "$p" .patch)
  case $n in
    kkt_solve_series5) continue ;;                   # after its base, below
    fused_fwd_*) base=kernels/hopper/fused_fwd.py ;;
    *) base=kernels/hopper/kkt_solve.py ;;
  esac
  patch -s -o "$D/$n.py" "$base" < "$p"
done
patch -s -o "$D/kkt_solve_series5.py" "$D/kkt_solve_series.py" < $P/kkt_solve_series5.patch
echo "$(ls $P/*.patch | wc -l) kernels in $D"
