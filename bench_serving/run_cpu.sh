#!/usr/bin/env bash
# The CPU main job: build the vLLM CPU venv (once), build the tiny Qwen3-Next model (once), serve
# it with vLLM's own GDN path (`auto`) and with --attention-backend qla, print the latency table
# and the GDN share (bench_serving/README.md).
#
#   bash bench_serving/run_cpu.sh [serve.py args...]     (e.g. --preset cpu-smoke, --fresh)
#
# Results: bench_serving/results/cpu/{results.json,summary.md,*.png} (resumes unless --fresh)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${QLA_VLLM_VENV:-$ROOT/.venv-vllm}"
bash "$ROOT/.ci/setup-vllm.sh" "$VENV" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
# --fresh: the main job always serves and measures; the committed results are replaced, not resumed.
exec "$VENV/bin/python" "$ROOT/bench_serving/serve.py" --preset cpu --fresh "$@"
