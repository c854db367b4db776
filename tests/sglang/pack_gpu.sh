#!/usr/bin/env bash
# Builds .gpu-sglang/ (git-ignored) for tests/sglang/test_sglang_gpu.py on the H200:
#
#   bash tests/sglang/pack_gpu.sh        # here, once (~2 min on 2 cores; network for pip only)
#
# SGLang 0.5.23 is in no GPU pack: it pins torch 2.14.1 and its CUDA kernels (sgl_kernel) are built
# for it, while the H200 image has torch 2.11. The adapter test needs only SGLang's Python (the
# kernel base class, ForwardMode and the pure-torch GDN reference kit), so this installs, with
# --no-deps, for CPython $PYVER x86-64 into one --target tree: sglang 0.5.23 and the packages its
# import chain needs that neither the H200 image nor the .gpu-vllm pack has at the version SGLang
# pins (transformers 5.19.0 and compressed-tensors 0.18.0 as pinned; gguf, orjson; fastapi 0.165.0 +
# opentelemetry-api, dill and traitlets as in the CPU test venv). The list is the distributions the
# test's imports load in the CPU venv minus the H200 image's package list (KINDS.md) and the
# .gpu-vllm pack: dill was missing on the H200 on 2026-11-30 (the test stopped at collection).
# It prunes what the test never imports
# (multimodal_gen, benchmark, tests other than the kits, the Rust extensions) and packs the tree
# as .gpu-sglang/site.tar.xz (~13 MB), with .gpu-sglang/prelude.sh that unpacks it on the device.
# Import-only stand-ins for sgl_kernel and a FlashInfer blocker live in tests/sglang/gpu_stubs/
# (tracked; they travel with the tree). Carry ".gpu-sglang" (see bench_serving/GPU_RUNBOOK.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
PYVER="${PYVER:-3.12}"
OUTDIR="${OUTDIR:-.gpu-sglang}"
PKGS=(sglang==0.5.23 transformers==5.19.0 compressed-tensors==0.18.0 gguf==0.19.0 orjson==3.13.0
      fastapi==0.165.0 opentelemetry-api==1.45.2 dill==0.4.1 traitlets==5.16.1)
grep -qxF '/.gpu-sglang/' .git/info/exclude 2>/dev/null || echo '/.gpu-sglang/' >> .git/info/exclude
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
python3 -m pip install -q --disable-pip-version-check --no-compile --no-deps --only-binary=:all: \
  --python-version "$PYVER" --implementation cp --platform manylinux_2_34_x86_64 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --target "$stage/site" "${PKGS[@]}" 2>&1 | grep -v "^WARNING: \(Location\|Running pip as\)" || true
test -d "$stage/site/sglang" || { echo "pack_gpu: sglang did not install" >&2; exit 1; }
rm -rf "$stage/site/bin" "$stage/site/sglang/multimodal_gen" "$stage/site/sglang/benchmark"
find "$stage/site/sglang" -name '*.so' -delete
find "$stage/site/sglang/test" -mindepth 1 -maxdepth 1 ! -name kits ! -name __init__.py -exec rm -rf {} +
mkdir -p "$OUTDIR"
tar -C "$stage" -cf - site | xz -T2 -6 > "$OUTDIR/site.tar.xz.tmp"
mv "$OUTDIR/site.tar.xz.tmp" "$OUTDIR/site.tar.xz"
printf '%s\n' "${PKGS[@]}" > "$OUTDIR/packages.txt"
echo "cp${PYVER/./}" > "$OUTDIR/python.txt"
cat > "$OUTDIR/prelude.sh" <<'PRELUDE'
# Sourced on the H200 from the repo root, after the .gpu-vllm prelude (tests/sglang/run_gpu.sh does).
# Unpacks SGLang's tree once and puts it, after the import stubs, in front of the path: only for
# the SGLang test's processes (vLLM keeps the pack's FlashInfer and fastapi).
if [[ ! -d .gpu-sglang/site ]]; then
  xz -dc -T0 .gpu-sglang/site.tar.xz | tar -xf - -C .gpu-sglang || return 1
fi
export PYTHONPATH=$PWD/tests/sglang/gpu_stubs:$PWD/.gpu-sglang/site${PYTHONPATH:+:$PYTHONPATH}
export SGLANG_IS_FLASHINFER_AVAILABLE=false   # SGLang's own switch; gpu_stubs/flashinfer blocks the rest
PRELUDE
ls -la "$OUTDIR"
