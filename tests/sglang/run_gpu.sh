#!/usr/bin/env bash
# SGLang adapter on the H200 (issue 6): tests/sglang/test_sglang_gpu.py — QLAGDNKernel.extend with
# the TileLang kernel against qla-serve's reference on SGLang-shaped inputs (packed strided q/k/v,
# padding slots, fp32 and bf16 pools) and the radix-cache track_state snapshot.
#
#   source .gpu-vllm/prelude.sh && bash tests/sglang/run_gpu.sh     # carry: [".gpu-sglang"]
#
# Needs .gpu-sglang/ (tests/sglang/pack_gpu.sh, built on the CPU machine) and TileLang from the
# .gpu-vllm (or .gpu) pack. Registers qla-serve (pip -e, offline), unpacks SGLang (prelude), prints
# the versions it imports, runs the test; env line and log under $OUT (default .work/sglang-gpu).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/.work/sglang-gpu}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
if [[ -z "${SITE:-}" ]]; then   # no pack prelude sourced yet
  if [[ -f .gpu-vllm/prelude.sh ]]; then source .gpu-vllm/prelude.sh; else source .gpu/prelude.sh; fi || exit 1
fi
[[ -f .gpu-sglang/prelude.sh ]] || { echo "run_gpu: .gpu-sglang/ missing: carry it (bash tests/sglang/pack_gpu.sh builds it)"; exit 2; }
"$PY" -c 'import qla_serve.integrations' 2>/dev/null \
  || "$PY" -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/sglang-pip.log" 2>&1 \
  || { tail -5 "$OUT/sglang-pip.log"; exit 1; }
source .gpu-sglang/prelude.sh || { echo "run_gpu: unpacking .gpu-sglang failed"; exit 1; }
export SGLANG_IS_FLASHINFER_AVAILABLE=false
"$PY" - <<'PY' 2>&1 | grep -v -i "warn" | tee "$OUT/sglang-env.txt"
import torch, sglang, transformers, tilelang
print("torch", torch.__version__, "| sglang", sglang.__version__, "from", sglang.__file__.rsplit("/", 2)[0],
      "| transformers", transformers.__version__, "| tilelang", tilelang.__version__,
      "| cuda", torch.cuda.is_available() and torch.cuda.get_device_name())
PY
cd tests/sglang   # the test imports qla_sgl_helpers from here
timeout "${SGLANG_TEST_TIMEOUT:-300}" "$PY" -m pytest -q -p no:cacheprovider -rA test_sglang_gpu.py 2>&1 | tee "$OUT/sglang-gpu-test.log" | grep -v "^\s*$" | tail -40
rc=${PIPESTATUS[0]}
echo "sglang gpu test: exit $rc"
exit "$rc"
