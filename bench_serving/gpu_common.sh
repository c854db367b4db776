# Sourced by the H200 scripts (gpu_vllm_check.sh, run_h200.sh): one home for the machine setup.
# Expects ROOT, OUT, TP, PY. Records the environment in $OUT/env.txt, registers qla-serve's vLLM
# plugin in this Python, and defines `warm MODEL_DIR` (compile qla-serve's TileLang variants for
# the model before vLLM takes traffic; QLA_WARMUP=0 skips; failure is not fatal).
mkdir -p "$OUT"
# Multi-GPU machines here keep NVLink multicast off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1
# are set there and inherited by every server): also keep vLLM off torch symmetric-memory all-reduce,
# whose multimem path does not run there.
if [ "${TP:-1}" != 1 ]; then export VLLM_ALLREDUCE_USE_SYMM_MEM=0; fi
{
  echo "# $(date -u +%FT%TZ) $(basename "$0")"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  "$PY" -c 'import torch, vllm; print("torch", torch.__version__, "vllm", vllm.__version__)'
} | tee "$OUT/env.txt"

"$PY" -m pip install -q --no-deps --no-build-isolation -e "$ROOT" 2>&1 | tail -2 || true
"$PY" - <<'PY'
import importlib.metadata as md
eps = [e.value for e in md.entry_points(group="vllm.general_plugins") if e.name == "qla"]
assert eps, "qla-serve's vLLM entry point is not registered in this Python"
import qla_serve.integrations.vllm as p
print("qla plugin:", eps[0], "| vLLM", p.check_vllm_version())
PY

warm() {
  "$PY" -m qla_serve.cli info 2>&1 | tee "$OUT/qla-serve-info.txt" | tail -12 || true
  [ "${QLA_WARMUP:-1}" = 1 ] || return 0
  local t0=$SECONDS
  # The variants vLLM's adapter hits (q/k/v views of the conv output, the op's l2norm pass,
  # has_initial_state, the gdn_gating kernels),
  # both pool dtypes (vLLM's ssm cache is the model dtype unless --mamba-ssm-cache-dtype), built in
  # one pool of one process per core. gpu_prep.sh does this for every shape at once.
  "$PY" -m qla_serve.cli warmup --config "$1/config.json" --tp "$TP" --engine vllm 2>&1 | tail -5 \
    || echo "qla-serve warmup failed; kernels compile on first use"
  echo "warmup: $((SECONDS - t0)) s"
}
