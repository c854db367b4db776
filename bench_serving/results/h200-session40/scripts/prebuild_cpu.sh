# Session 40's plan: the kernel cache for the next lease's calls A and B, built on the CPU machine
# (2 cores; a new checkout starts with no cache). Writes .gpu-p/$TARBALL.tar.xz (default tlc40): carry it in the call
# that uses it (results/h200-session26/scripts/common.sh unpacks every .gpu-p/tlc*.tar.xz).
#   bash bench_serving/results/h200-session40/scripts/prebuild_cpu.sh [CACHE_DIR]   (empty or new; default /work/tlc)
# Steps (STEPS, default "tree pool ab"):
#   tree  the checkout: the GPU tests' variants and issue 3's six head configs (call A's tree side,
#         the whole GPU test file, the table);
#   pool  call A's other side: a site copy with riders-from-pool.patch (only phase 3 and the combine
#         differ), POOL_HEADS (2/8,4/16,16/32,16/64);
#   ab    call B's labels H, M5, H5 (kkt_solve only differs), AB_HEADS (16/32,2/8), with the GPU
#         tests' kernels of each.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)"
CACHE="${1:-/work/tlc}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
STEPS=" ${STEPS:-tree pool ab} "
TARBALL="${TARBALL:-tlc40}"
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 TILELANG_CACHE_DIR="$CACHE"
# Only entries written by this run are packed (newer than the stamp): a kernel already in CACHE is
# a cache hit, not rewritten, and would be missing from the tarball without a word.
if [ -n "$(ls -A "$CACHE/0.1.15/linux-x86_64/kernels" 2>/dev/null)" ]; then
  echo "prebuild_cpu.sh: $CACHE already holds kernels, which would not be packed; give an empty CACHE_DIR" >&2
  exit 1
fi
mkdir -p "$CACHE" "$ROOT/.gpu-p"
stamp="$CACHE/.stamp-session40"; touch "$stamp"
work="$(mktemp -d)"; t0=$SECONDS
cd "$ROOT"
source bench_serving/results/h200-session40/scripts/candidates.sh
if [[ $STEPS == *" tree "* ]]; then
  "$PY" bench_serving/gpu_prebuild.py --processes 2 > "$work/build-tree.log" 2>&1
  echo "tree: $(tail -n 1 "$work/build-tree.log") ($((SECONDS - t0)) s)"
fi
if [[ $STEPS == *" pool "* ]]; then
  site="$work/site-pool"
  pool_site "$site" "$work" || exit 1
  (cd "$site" && PYTHONPATH="$site" "$PY" bench_serving/gpu_prebuild.py --processes 2 --no-tests \
    --heads "${POOL_HEADS:-2/8,4/16,16/32,16/64}" > "$work/build-pool.log" 2>&1)
  echo "pool: $(tail -n 1 "$work/build-pool.log") ($((SECONDS - t0)) s)"
fi
if [[ $STEPS == *" ab "* ]]; then
  ab="$work/ab"
  kkt_labels "$ab" || exit 1
  PYTHON="$PY" AB_BUILD_ONLY=1 AB_SKIP_TREE=1 AB_PROCESSES=1 AB_HEADS="${AB_HEADS:-16/32,2/8}" \
    bash bench_serving/kernel_ab.sh "$work/abbuild" H="$ab/kkt_solve_f16.py" M5="$ab/kkt_solve_m5.py" \
    H5="$ab/kkt_solve_f16m5.py"
  echo "call B labels: $((SECONDS - t0)) s"
fi
(cd "$CACHE" && find 0.1.15/linux-x86_64/kernels 0.1.15/cuda-binaries -mindepth 1 -maxdepth 1 -newer "$stamp" \
  | tar -cJf "$ROOT/.gpu-p/$TARBALL.tar.xz" -T -)       # session 39 carried both folders
echo "$ROOT/.gpu-p/$TARBALL.tar.xz: $(tar -tJf "$ROOT/.gpu-p/$TARBALL.tar.xz" | grep -c '/$') entries, $(du -h "$ROOT/.gpu-p/$TARBALL.tar.xz" | cut -f1)"
rm -rf "$work"
