# The register variants of h200-session56/regs/ as whole fused_fwd.py files (.work/ab/r1.py, r2.py:
# main's walk with regs_variant_{1,2}.patch applied) and their kernels, built on the CPU machine for
# call_regs.sh: the quick GPU tests' variants and the bench's 16/64, 16/32, 2/8, each in a copy of the
# package laid out as kernel_ab.sh lays it out. Run through gpu_cache_subset.sh so only what the
# builds looked up is packed:
#   mkdir -p /tmp/tlc56 && tar -xJf .gpu-p/tlc54.tar.xz -C /tmp/tlc56
#   bash bench_serving/gpu_cache_subset.sh /tmp/tlc56 .gpu-p/tlc56r.tar.xz -- bash bench_serving/results/h200-session56/scripts/build_regs_kernels.sh
set -e
cd "$(dirname "$0")/../../../.."
ROOT=$PWD
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100
PY=${PY:-$ROOT/.venv/bin/python}
mkdir -p .work/ab
for n in 1 2; do
  tmp=$(mktemp -d)
  mkdir -p $tmp/kernels/hopper && cp kernels/hopper/fused_fwd.py $tmp/kernels/hopper/
  (cd $tmp && git apply "$ROOT/bench_serving/results/h200-session56/regs/regs_variant_$n.patch")
  cp $tmp/kernels/hopper/fused_fwd.py .work/ab/r$n.py
  site=$tmp/site && mkdir -p $site
  cp -r qla_serve tests bench_serving $site/ && rm -rf $site/bench_serving/results
  cp -r kernels $site/qla_serve/kernels && cp -r integrations $site/qla_serve/integrations
  cp .work/ab/r$n.py $site/qla_serve/kernels/hopper/fused_fwd.py
  (cd $site && PYTHONPATH=$site $PY bench_serving/gpu_prebuild.py --processes 2 --heads 16/64,16/32,2/8 \
     --test-configs 0,3,5,6,7,18) 2>&1 | tail -n 2
  rm -rf $tmp
done
