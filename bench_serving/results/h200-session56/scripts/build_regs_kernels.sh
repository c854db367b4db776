# The register variants of h200-session56/regs/ as whole fused_fwd.py files (.work/ab/r1.py, r2.py:
# main's walk with regs_variant_{1,2}.patch applied) and their kernels, built on the CPU machine for
# call_regs.sh by kernel_ab.sh's build-only mode (each label's package copy): the quick GPU tests'
# variants (common.sh's QUICK_CONFIGS) and the bench's 16/64, 16/32, 2/8. Run through
# gpu_cache_subset.sh so only what the builds looked up is packed:
#   mkdir -p /tmp/tlc56 && tar -xJf .gpu-p/tlc54.tar.xz -C /tmp/tlc56
#   bash bench_serving/gpu_cache_subset.sh /tmp/tlc56 .gpu-p/tlc56r.tar.xz -- bash bench_serving/results/h200-session56/scripts/build_regs_kernels.sh
set -e
cd "$(dirname "$0")/../../../.."
ROOT=$PWD
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100
mkdir -p .work/ab
for n in 1 2; do
  tmp=$(mktemp -d)
  mkdir -p $tmp/kernels/hopper && cp kernels/hopper/fused_fwd.py $tmp/kernels/hopper/
  (cd $tmp && git apply "$ROOT/bench_serving/results/h200-session56/regs/regs_variant_$n.patch")
  cp $tmp/kernels/hopper/fused_fwd.py .work/ab/r$n.py
  rm -rf $tmp
done
out=$(mktemp -d)
AB_BUILD_ONLY=1 AB_SKIP_TREE=1 AB_TEST_CONFIGS=0,3,5,6,7,18 AB_PROCESSES=2 AB_HEADS=16/64,16/32,2/8 \
  PYTHON=${PY:-$ROOT/.venv/bin/python} bash bench_serving/kernel_ab.sh $out R1=.work/ab/r1.py R2=.work/ab/r2.py
rm -rf $out
