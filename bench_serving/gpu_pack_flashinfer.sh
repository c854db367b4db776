#!/usr/bin/env bash
# Pack FlashInfer 0.6.14 (issue 3's fourth anchor: vLLM's default GDN prefill on sm_90) for the
# device machine without the whole vLLM bundle (six 60-MiB parts): its sm_90 GDN prefill is a CuTe
# DSL kernel (flashinfer/gdn_kernels/delta_rule_dsl/, a context-parallel form where few sequence-heads
# run), so it needs the CuTe DSL compiler (nvidia-cutlass-dsl 4.6.0, the vLLM bundle's version) but
# none of FlashInfer's C++ JIT sources: flashinfer/data (75 MB of headers) stays behind.
#
#   bash bench_serving/gpu_pack_flashinfer.sh     # -> .gpu-fi/prelude.sh + site.tar.xz.part00, part01
#
# ~69 MB in two parts: part00 small enough to ride with .gpu (44 MiB) in one call, part01 alone.
# On the device, after both parts went up (the machine keeps ignored files while warm), begin with
#   source .gpu/prelude.sh && source .gpu-fi/prelude.sh && ...
# The DSL compiler's .so files are built for CPython 3.12 (the device's python3): nothing here
# can import them on the 3.11 CPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.gpu-fi
cache=${QLA_GPU_CACHE:-$HOME/.cache/qla-gpu}/fi-0.6.14
reqs=(flashinfer-python==0.6.14 nvidia-cutlass-dsl==4.6.0 nvidia-cutlass-dsl-libs-base==4.6.0
      nvidia-cutlass-dsl-libs-core==4.6.0 nvidia-cutlass-dsl-libs-cu13==4.6.0 cuda-tile==1.7.0
      nvidia-cudnn-frontend==1.28.0 einops tabulate nvidia-ml-py click ninja
      requests urllib3 idna charset-normalizer certifi)
if [[ ! -f $cache/done ]]; then
  rm -rf "$cache"; mkdir -p "$cache/wheels"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$cache/wheels" "${reqs[@]}"
  stage=$(mktemp -d); mkdir "$stage/site"
  for w in "$cache"/wheels/*.whl; do unzip -q -o "$w" -d "$stage/site"; done
  for d in "$stage"/site/*.data; do
    [[ -d $d ]] || continue
    for sub in purelib platlib; do [[ -d $d/$sub ]] && cp -a "$d/$sub/." "$stage/site/"; done
    rm -rf "$d"
  done
  rm -rf "$stage/site/flashinfer/data"
  echo "compressing $(du -sh "$stage/site" | cut -f1) (~1.5 min on 2 cores)..."
  tar -C "$stage" -cf - site | xz -T2 -7 > "$cache/site.tar.xz"
  rm -rf "$stage" "$cache/wheels"
  touch "$cache/done"
fi
rm -rf "$out"; mkdir -p "$out"
head -c 16M "$cache/site.tar.xz" > "$out/site.tar.xz.part00"
tail -c +$((16 * 1024 * 1024 + 1)) "$cache/site.tar.xz" > "$out/site.tar.xz.part01"
cat > "$out/prelude.sh" <<'PRELUDE'
# sourced on the device machine from the repo root, after .gpu/prelude.sh and both parts went up
if [[ ! -d .gpu-cache/fi-site ]]; then
  # its own folder first: the archive's top is site/, the name .gpu/prelude.sh unpacks TileLang into
  rm -rf .gpu-cache/fi-tmp && mkdir -p .gpu-cache/fi-tmp &&
    cat .gpu-fi/site.tar.xz.part* | xz -dc -T16 | tar -xf - -C .gpu-cache/fi-tmp &&
    mv .gpu-cache/fi-tmp/site .gpu-cache/fi-site && rmdir .gpu-cache/fi-tmp || return 1
fi
export PYTHONPATH=$PWD/.gpu-cache/fi-site:$PWD/.gpu-cache/fi-site/nvidia_cutlass_dsl/dsl_packages${PYTHONPATH:+:$PYTHONPATH}
PRELUDE
ls -la "$out"
