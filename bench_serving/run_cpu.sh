#!/usr/bin/env bash
# The CPU main job: build the vLLM CPU venv (once), build the tiny Qwen3-Next model (once), serve
# it with vLLM's own GDN path and with --attention-backend qla, print the latency table.
#
#   bash bench_serving/run_cpu.sh [serve.py args...]     (e.g. --prompt-lens 128,2000)
#
# Results: bench_serving/results/cpu/{results.json,summary.md,server-*.log}
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${QLA_VLLM_VENV:-$ROOT/.venv-vllm}"
bash "$ROOT/.ci/setup-vllm.sh" "$VENV" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
exec "$VENV/bin/python" "$ROOT/bench_serving/serve.py" "$@"
