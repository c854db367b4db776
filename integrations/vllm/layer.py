"""The GDN layer adapter: vLLM's ``QwenGatedDeltaNetAttention`` with its prefill through qla-serve.

Registered with ``QwenGatedDeltaNetAttention.register_oot``; when the run did not select qla-serve
every method defers to vLLM's layer, so the plugin changes nothing.

When selected, one seam splits each step of a GDN layer (``_forward_core``):

* decode-only steps, speculative verify, profiling runs → vLLM's own core, untouched (the first
  profiling run, or else the first prefill, also loads qla-serve's kernels for this layer's
  shapes, once per worker: ``qla_serve.warmup.preload``);
* a step with prefills → all its tokens in one pass: vLLM's causal conv over the whole batch
  (``QLA_VLLM_CONV=qla``: ``qla_serve.gdn_conv`` on vLLM's conv state, q/k normalised there), then
  one ``qla_serve.gdn_prefill`` call on q/k/v as views of the conv output and the raw gate inputs
  (the op normalises q/k and computes the gates in one pass; CPU: gates from vLLM's CPU gating op),
  in which the step's decode requests (vLLM puts them first) are one-token sequences beside the
  prefill chunks. It reads and writes vLLM's
  state cache in place by ``non_spec_state_indices_tensor`` (``has_initial_state``; null block
  0 → ``null_slot=0``), with a plan the metadata builder made from vLLM's CPU-side
  ``query_start_loc`` (no device→host sync). vLLM's own core runs such a step as two paths (the
  chunked kernel for the prefills, its recurrent decode kernel for the rest); one call saves the
  second path's launches, a second conv and its tables, and a decode-only copy of the metadata.

If qla-serve cannot take a call, the layer runs vLLM's path for it and says why once (on CUDA
that includes "no qla-serve kernel takes it": vLLM's kernel beats qla-serve's PyTorch reference;
``QLA_BACKEND=reference`` overrides). Environment:

* ``QLA_VLLM_TRACE=/path/file``: each worker appends one JSON line per qla-serve prefill call;
* ``QLA_VLLM_FORCE_FALLBACK=1``: run vLLM's own path for every call (debugging, tests);
* ``QLA_VLLM_AB_SWITCH=/path/file``: while that file exists, the metadata builder makes no plan and
  the step's prefills run vLLM's own path (benchmarks: ``bench_serving/serve.py``'s ``paired``
  backend flips it between requests, so one server measures both paths and the server-to-server
  spread drops out of the comparison);
* ``QLA_VLLM_FALLBACK_PREFILL=triton|flashinfer``: the kernel vLLM's own path uses for prefills in
  this server (``engine_ops.choose_fallback_prefill``; default vLLM's choice, FlashInfer on sm_90);
  with the switch above it makes a paired server of qla-serve against vLLM's Triton kernels;
* ``QLA_VLLM_STEP_TIMING=/path/file``: per-step wall time of the GDN core on prefill steps, for
  qla-serve and for vLLM's own path alike (``timing.py``; benchmarks). On CPU this routes vLLM's
  own path through the same generic forward as qla-serve (same CPU op, timed at the core).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from typing import Any

import torch

from vllm.forward_context import get_forward_context
from vllm.model_executor.custom_op import op_registry_oot
from vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn import QwenGatedDeltaNetAttention
from vllm.v1.attention.backends.gdn_attn import (
    GDNAttentionBackend,
    GDNAttentionMetadata,
    GDNAttentionMetadataBuilder,
)

from qla_serve import gdn_prefill, plan_prefill
from qla_serve.plan import PrefillPlan
from qla_serve.warmup import preload

from . import engine_ops, timing
from .selection import qla_requested

logger = logging.getLogger("vllm.qla_serve")  # under "vllm" so vLLM's log handler prints it

NULL_BLOCK_ID = 0  # vLLM's null block: the state slot of padding requests
TRACE_ENV = "QLA_VLLM_TRACE"
FALLBACK_ENV = "QLA_VLLM_FORCE_FALLBACK"  # run vLLM's own prefill path (debugging, tests)
AB_SWITCH_ENV = "QLA_VLLM_AB_SWITCH"      # benchmarks: vLLM's path while the named file exists
_said: set[str] = set()


def _say_once(level: int, msg: str, *args: Any) -> None:
    key = msg % args if args else msg
    if key not in _said:
        _said.add(key)
        logger.log(level, msg, *args)


# ----------------------------------------------------------------------------------------------
# Metadata: vLLM's GDN metadata + the host plan for its prefill slice
# ----------------------------------------------------------------------------------------------
@dataclasses.dataclass
class QLAGDNAttentionMetadata(GDNAttentionMetadata):
    qla_plan: PrefillPlan | None = None     # the step's num_decodes + num_prefills sequences
    qla_conv_metadata: Any = None           # vLLM's causal-conv tables for the same batch (CUDA)
    # Dense copies of the batch's state indices / has-initial-state flags. vLLM's indices are
    # column 0 of its block table (a strided view) and the kernels index dense vectors: one async
    # device copy per step here instead of one per GDN layer.
    qla_state_indices: torch.Tensor | None = None
    qla_has_initial_state: torch.Tensor | None = None
    # Why this step was built without a plan on purpose (the A/B switch): the layer runs vLLM's path.
    qla_off: str | None = None


class QLAGDNAttentionMetadataBuilder(GDNAttentionMetadataBuilder):
    """vLLM's builder, plus a qla-serve plan built from the CPU ``query_start_loc`` it already holds
    (steps with prefills and no speculative tokens: decodes first, then prefills, from token 0)."""

    def build(self, common_prefix_len, common_attn_metadata, *args, **kwargs):
        tm = timing.timer()
        t0 = time.perf_counter()
        md = super().build(common_prefix_len, common_attn_metadata, *args, **kwargs)
        if md.num_prefills == 0 or md.spec_sequence_masks is not None:
            return md  # decode / spec batches never reach qla-serve
        t1 = time.perf_counter()
        fields = {f.name: getattr(md, f.name) for f in dataclasses.fields(md)}
        switch = os.environ.get(AB_SWITCH_ENV)
        if switch and os.path.exists(switch):   # decided once per step: builder and layers agree
            if tm is not None:
                tm.note("builder_ms", (t1 - t0) * 1e3)
            return QLAGDNAttentionMetadata(**fields, qla_off=f"the {AB_SWITCH_ENV} file exists (paired benchmark)")
        qsl_cpu = common_attn_metadata.query_start_loc_cpu
        device = common_attn_metadata.query_start_loc.device
        n = md.num_decodes + md.num_prefills
        cu_cpu = qsl_cpu[: n + 1]
        md = QLAGDNAttentionMetadata(
            **fields,
            # Every path of the layer hands the walk l2-normalised keys (the op's l2norm pass, qla's
            # conv, or vLLM's prep: engine_ops.prefill_inputs), so CP may use tail starts.
            qla_plan=plan_prefill(cu_cpu, device=device, unit_norm_keys=True, **self._qla_heads()),
            qla_conv_metadata=engine_ops.conv_metadata(cu_cpu, device, md),
            qla_state_indices=md.non_spec_state_indices_tensor[:n].contiguous(),
            qla_has_initial_state=md.has_initial_state[:n].contiguous(),
        )
        if tm is not None:  # benchmarks: what the builder costs the host on prefill steps
            tm.note("builder_ms", (t1 - t0) * 1e3)
            tm.note("qla_builder_ms", (time.perf_counter() - t1) * 1e3)
        return md


    def _qla_heads(self) -> dict[str, int]:
        """Value heads per rank and their width, from the layers' state shape ((HV, V, K), vLLM's
        ``gated_delta_net_state_shape``): with them the plan also holds the kernels' own tables,
        built here rather than in the step's first GDN layer. {} when the spec is not that shape."""
        shapes = getattr(self.kv_cache_spec, "shapes", None)
        if not shapes or len(shapes) < 2 or len(shapes[1]) != 3:
            return {}
        return {"num_v_heads": int(shapes[1][0]), "head_v_dim": int(shapes[1][1])}


class QLAGDNAttentionBackend(GDNAttentionBackend):
    @staticmethod
    def get_builder_cls() -> type[GDNAttentionMetadataBuilder]:
        return QLAGDNAttentionMetadataBuilder


# ----------------------------------------------------------------------------------------------
# The layer
# ----------------------------------------------------------------------------------------------
class QLAGatedDeltaNetAttention(QwenGatedDeltaNetAttention):
    """vLLM's Qwen GDN layer; with qla-serve selected, its prefill runs through ``gdn_prefill``."""

    def __init__(self, config, vllm_config, *args, **kwargs) -> None:
        super().__init__(config, vllm_config, *args, **kwargs)
        self.qla_enabled = qla_requested(vllm_config)
        self.qla_calls = 0  # prefill calls served by qla-serve in this process
        self.qla_preloaded = False  # this layer asked qla_serve.warmup.preload (once per process anyway)
        if self.qla_enabled:
            _say_once(logging.INFO, "qla-serve: GDN prefill of %s runs through qla_serve.gdn_prefill "
                      "(decode and spec verify stay on vLLM's kernels)", type(self).__mro__[1].__name__)
            chose = engine_ops.choose_fallback_prefill(self)
            if chose:
                _say_once(logging.INFO, "qla-serve: %s", chose)

    # vLLM asks each layer for its metadata backend: ours adds the host plan.
    def get_attn_backend(self):
        return QLAGDNAttentionBackend if self.qla_enabled else super().get_attn_backend()

    # vLLM's CPU forward calls its CPU op, which never reaches _forward_core; with qla-serve on, use
    # vLLM's generic forward instead: projections → vllm::qwen_gdn_attention_core → _forward_core.
    def forward_cpu(self, hidden_states: torch.Tensor) -> torch.Tensor:
        if not self.qla_enabled and timing.timer() is None:
            return super().forward_cpu(hidden_states)
        return self.forward_cuda(hidden_states)

    def _forward_core(self, mixed_qkv, b, a, core_attn_out):
        tm = timing.timer()
        if tm is not None:
            md = _layer_metadata(self.prefix)
            if md is not None:
                tm.mark(self.prefix)
                if md.num_prefills > 0 and md.spec_sequence_masks is None:
                    path = "qla" if self.qla_enabled and getattr(md, "qla_plan", None) is not None else "vllm"
                    return tm.run(path, md, self._core, mixed_qkv, b, a, core_attn_out)
        return self._core(mixed_qkv, b, a, core_attn_out)

    def _core(self, mixed_qkv, b, a, core_attn_out):
        if not self.qla_enabled:  # vLLM's core (on CPU only reached with timing on: see forward_cpu)
            return self._vllm_core(mixed_qkv, b, a, core_attn_out)
        md = _layer_metadata(self.prefix)
        if md is None and not self.qla_preloaded:
            self._preload_kernels(mixed_qkv.device)
        if md is None or md.num_prefills == 0 or md.spec_sequence_masks is not None:
            # The seam: decode-only steps, speculative verify and profiling stay on vLLM's kernels.
            return self._vllm_core(mixed_qkv, b, a, core_attn_out)
        reason = self._qla_why_not(md, mixed_qkv.dtype)
        if reason is not None:
            _say_once(logging.WARNING, "qla-serve: GDN prefill falls back to vLLM's own path: %s", reason)
            return self._vllm_core(mixed_qkv, b, a, core_attn_out)
        end = md.num_decode_tokens + md.num_prefill_tokens   # the rest is CUDA-graph padding
        self._qla_prefill(mixed_qkv[:end], b[:end], a[:end], core_attn_out[:end], md)

    # -- pieces ---------------------------------------------------------------------------------
    def _preload_kernels(self, device: torch.device) -> None:
        """Load the qla-serve kernels this layer's prefills will use, so no request pays their
        load: in vLLM's profiling run on GPU (no metadata: before any request), else (vLLM's CPU
        worker does not profile) at the first prefill. ``preload`` acts once per process."""
        self.qla_preloaded = True
        try:
            _, pool_dtype = self.get_state_dtype()   # vLLM's ssm-cache dtype (MambaBase API)
        except Exception as exc:  # a vLLM without it: kernels load on first use
            _say_once(logging.INFO, "qla-serve: no kernels preloaded (state dtype unknown: %r)", exc)
            return
        why = preload(device, self.num_k_heads // self.tp_size, self.num_v_heads // self.tp_size, pool_dtype,
                      engine="vllm", log=lambda msg: _say_once(logging.INFO, "%s", msg))
        if why is not None:
            _say_once(logging.INFO, "qla-serve: no kernels preloaded (%s)", why)

    def _vllm_core(self, mixed_qkv, b, a, core_attn_out) -> None:
        engine_ops.engine_forward_core(self, super()._forward_core, mixed_qkv, b, a, core_attn_out)

    def _qla_why_not(self, md, act_dtype: torch.dtype) -> str | None:
        if os.environ.get(FALLBACK_ENV, "0") not in ("", "0"):
            return f"{FALLBACK_ENV} is set"
        if getattr(md, "qla_off", None):
            return md.qla_off
        plan = getattr(md, "qla_plan", None)
        if plan is None:
            return "the step's GDN metadata carries no qla-serve plan (metadata builder is not qla-serve's)"
        seqs, tokens = md.num_decodes + md.num_prefills, md.num_decode_tokens + md.num_prefill_tokens
        if plan.num_seqs != seqs or plan.total_tokens != tokens:
            return (f"plan describes {plan.num_seqs} sequences / {plan.total_tokens} tokens but the batch "
                    f"has {seqs} / {tokens}")
        return engine_ops.platform_why_not(self) or engine_ops.kernel_why_not(self, plan, act_dtype)

    def _qla_prefill(self, x, b, a, out, md) -> None:
        if not self.qla_preloaded:
            self._preload_kernels(x.device)
        plan: PrefillPlan = md.qla_plan
        cu = md.non_spec_query_start_loc[: plan.num_seqs + 1]
        pool, layout = qla_core(self, x, b, a, out, cu, md.qla_state_indices, md.qla_has_initial_state,
                                md.qla_conv_metadata, plan)
        self.qla_calls += 1
        if self.qla_calls == 1:
            _say_once(logging.INFO, "qla-serve: first GDN prefill through qla-serve (state pool %s %s per "
                      "layer, layout %s)", tuple(pool.shape), str(pool.dtype).removeprefix("torch."), layout)
        _trace(self.prefix, plan, md)


def qla_core(layer, x, b, a, out, cu_seqlens, state_indices, has_initial_state, conv_md, plan):
    """One GDN layer's prefill core through qla-serve (also what ``bench_serving/layer_profile.py``
    times): vLLM's causal conv (or ``gdn_conv``) → q/k/v views and the gate inputs →
    ``gdn_prefill`` on the layer's state cache, in place. Returns ``(pool, layout)``.
    With step timing on, each piece's host time is recorded (``timing.StepTimer.lap``)."""
    tm = timing.timer()
    conv_out, normalised = engine_ops.conv_prefill(layer, x, cu_seqlens, state_indices, has_initial_state,
                                                   conv_md, plan)
    if tm is not None:
        tm.lap("conv")
    q, k, v, gates, l2norm = engine_ops.prefill_inputs(layer, conv_out, a, b, normalised)
    pool, layout = engine_ops.state_pool(layer)
    gdn_prefill(q, k, v, **gates, state_pool=pool, state_indices=state_indices, cu_seqlens=cu_seqlens,
                has_initial_state=has_initial_state, plan=plan, scale=layer.head_k_dim ** -0.5,
                use_qk_l2norm=l2norm, out=out, state_layout=layout, null_slot=NULL_BLOCK_ID)
    if tm is not None:
        tm.lap("op")
    return pool, layout


def _layer_metadata(prefix: str):
    table = get_forward_context().attn_metadata
    return table.get(prefix) if isinstance(table, dict) else None


def _trace(prefix: str, plan: PrefillPlan, md) -> None:
    path = os.environ.get(TRACE_ENV)
    if not path:
        return
    rec = {"pid": os.getpid(), "t": time.time(), "layer": prefix, "seqs": plan.num_seqs, "tokens": plan.total_tokens,
           "max_seqlen": plan.max_seqlen, "decodes": md.num_decodes}
    f = _trace_files.get(path)
    if f is None:   # kept open, line-buffered: 4 µs a line here against 14 µs with an open/close each time
        f = _trace_files[path] = open(path, "a", buffering=1)
    f.write(json.dumps(rec) + "\n")


_trace_files: dict[str, Any] = {}


def register_layer() -> None:
    """Make vLLM build :class:`QLAGatedDeltaNetAttention` wherever it builds its Qwen GDN layer."""
    name = QwenGatedDeltaNetAttention.__name__
    current = op_registry_oot.get(name)
    if current is QLAGatedDeltaNetAttention:
        return
    if current is not None:
        raise RuntimeError(f"another plugin already replaced vLLM's {name} with {current.__module__}."
                           f"{current.__qualname__}; qla-serve cannot register its GDN layer")
    QwenGatedDeltaNetAttention.register_oot(QLAGatedDeltaNetAttention)
