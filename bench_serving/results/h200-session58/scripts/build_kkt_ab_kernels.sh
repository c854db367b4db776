# kkt_solve A/B candidates of session 58 as whole files in .work/ab (kernel_ab.sh replaces the
# package's kkt_solve.py with them; call_kkt_ab.sh carries them) and their kernels, built on the CPU
# machine by kernel_ab.sh's build-only mode: the quick GPU tests' variants (common.sh's
# QUICK_CONFIGS) and the bench's 16/64, 16/32, 2/8, the checkout's own included.
#   bash bench_serving/gpu_cache_subset.sh CACHE .gpu-p/tlc58X.tar.xz -- bash bench_serving/results/h200-session58/scripts/build_kkt_ab_kernels.sh LABEL ...
# (tlc58 = M6, tlc58z = Z, tlc58q = P2 L2P, tlc59g = GB; CACHE seeded from .gpu-p/tlc54.tar.xz and
# ~/.tilelang/cache, for GB from tlc58q, tlc58b and tlc58p.)
# FILES_ONLY=1 writes the .work/ab files and builds nothing (the kernels are in the tar already).
# Labels, each from a fixed commit's kkt_solve.py so that it builds the same kernel whatever main becomes:
#   M6   main before session 58 (f285d3a) at MIN_BLOCKS = 6 (80 registers)
#   Z    without the o_s clear: main at 36e153d
#   P2   two chunks a CTA, both chunks' K, g and β by cp.async up front (T.Pipelined): ../kkt_solve_p2.patch
#   L2P  each CTA prefetching into L2 the loads of the CTA 4 × 132 places after it: ../kkt_solve_l2p.patch
#   GB   (session 59) an odd G's g and β as G + 1 rows, whole rounds of the threads: ../kkt_solve_gb.patch
#   LDP  (session 59) L_II's rows 24 floats apart in shared memory (no bank conflicts in L's scatter;
#        its call 6 ran a first form with 20):
#        ../../h200-session59/kkt_solve_ldp.patch, on b5aa371's kkt_solve.py (main with GB)
#   NB   (session 59, an ablation: right only on 64-aligned batches) no chunk_bounds read, chunk bc
#        at token 64 · bc: ../../h200-session59/kkt_solve_nb_ablation.patch, on b5aa371's
# (the patches apply to 47119ac's kkt_solve.py, the kernel of 36e153d with its comments reworded).
set -e
cd "$(dirname "$0")/../../../.."
ROOT=$PWD
HERE=bench_serving/results/h200-session58
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100
mkdir -p .work/ab
from_patch() {   # patch [rev] → kkt_solve.py with it applied to rev's (default 47119ac)
  local tmp; tmp=$(mktemp -d)
  mkdir -p $tmp/kernels/hopper
  git show ${2:-47119ac}:kernels/hopper/kkt_solve.py > $tmp/kernels/hopper/kkt_solve.py
  (cd $tmp && git apply "$ROOT/$1") && cat $tmp/kernels/hopper/kkt_solve.py
  rm -rf $tmp
}
args=()
for label in "$@"; do
  file=.work/ab/kkt_solve_${label,,}.py
  case $label in
    M6) git show f285d3a:kernels/hopper/kkt_solve.py | sed 's/^MIN_BLOCKS = 4 /MIN_BLOCKS = 6 /' > $file
        grep -q '^MIN_BLOCKS = 6 ' $file ;;
    Z) git show 36e153d:kernels/hopper/kkt_solve.py > $file ;;
    P2) from_patch $HERE/kkt_solve_p2.patch > $file ;;
    L2P) from_patch $HERE/kkt_solve_l2p.patch > $file ;;
    GB) from_patch $HERE/kkt_solve_gb.patch > $file ;;
    LDP) from_patch bench_serving/results/h200-session59/kkt_solve_ldp.patch b5aa371 > $file ;;
    NB) from_patch bench_serving/results/h200-session59/kkt_solve_nb_ablation.patch b5aa371 > $file ;;
    *) echo "unknown label $label" >&2; exit 2 ;;
  esac
  args+=("$label=$file")
done
[ "${FILES_ONLY:-0}" = 1 ] && exit 0
out=$(mktemp -d)
AB_BUILD_ONLY=1 AB_TEST_CONFIGS=${AB_TEST_CONFIGS:-0,3,5,6,7,18} AB_PROCESSES=2 AB_HEADS=${AB_HEADS:-16/64,16/32,2/8} \
  PYTHON=${PY:-$ROOT/.venv/bin/python} bash bench_serving/kernel_ab.sh $out "${args[@]}"
rm -rf $out
