"""vLLM's own per-platform pieces the adapter calls around the qla-serve op (no math here).

Everything that depends on the platform (CUDA vs vLLM's CPU build) or on the vLLM release lives
in this file, so ``layer.py`` reads as one sequence: the convolution → the gates →
``qla_serve.gdn_prefill`` on vLLM's state cache.
"""
from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import torch

from vllm.model_executor.layers.mamba.mamba_utils import is_conv_state_dim_first
from vllm.platforms import current_platform

# Switches, read here and by warm-up, which builds what they select: QLA_VLLM_CONV=qla runs
# qla_serve.gdn_conv (q/k normalised in the conv) instead of vLLM's causal conv followed by the op's
# l2norm pass (the default: faster on the H200 in session 15); QLA_VLLM_PREP=vllm runs vLLM's
# fused_post_conv_prep after vLLM's conv (an A/B aid; its contiguous variants are not preloaded).
from qla_serve import GateInputs
from qla_serve.warmup import VLLM_PREP_ENV as PREP_ENV
from qla_serve.warmup import vllm_conv_choice as conv_choice

IS_CPU = current_platform.is_cpu()
IS_CUDA = current_platform.is_cuda()


def platform_why_not(layer) -> str | None:
    """Why the adapter cannot drive this platform/release (``None``: it can)."""
    if IS_CUDA:
        return None
    if IS_CPU:
        from vllm.model_executor.layers.mamba.ops.cpu import gdn_attention as cpu_gdn

        if not hasattr(cpu_gdn, "_causal_conv1d_fwd_cpu"):
            return "this vLLM CPU build predates the CPU conv helpers the adapter uses (needs vLLM ≥ 0.32 on CPU)"
        width = layer.conv1d.weight.size(-1)
        conv = layer.kv_cache[0]
        state_len = conv.size(-1) if is_conv_state_dim_first() else conv.size(-2)
        if state_len > width - 1:
            return "speculative decoding is configured (wide conv-state buffer): vLLM's CPU path handles it"
        return None
    return f"platform {current_platform.device_name!r} is not supported by the adapter (CUDA or CPU)"


def kernel_why_not(layer, plan, act_dtype: torch.dtype) -> str | None:
    """On CUDA, why no qla-serve *kernel* would take this prefill (``None``: one would).

    qla-serve's dispatcher falls back to its PyTorch reference when its kernels refuse a call; in
    a GPU server vLLM's own kernel beats that reference, so the layer falls back to vLLM instead.
    On CPU the reference *is* the path (CI serves with it). ``QLA_BACKEND`` set to anything but
    ``auto`` is honoured as is. The probe carries the real pool and plan and empty activations of
    the real dtypes and head counts: what the kernels' checks read.
    """
    if not IS_CUDA:
        return None
    from qla_serve import dispatch

    if dispatch.requested_backend() != "auto":
        return None
    pool, layout = state_pool(layer)
    # The answer depends on the pool, the activation dtype and the sequence count only; asking the
    # backends costs tens of µs of host time, once per GDN layer per step, so keep it per layer.
    answers = layer.__dict__.setdefault("qla_kernel_answers", {})
    key = (act_dtype, plan.num_seqs, pool.data_ptr(), pool.dtype, tuple(pool.shape), pool.stride(0))
    if key not in answers:
        answers[key] = _ask_kernels(layer, pool, layout, plan, act_dtype)
    return answers[key]


def _ask_kernels(layer, pool: torch.Tensor, layout: str, plan, act_dtype: torch.dtype) -> str | None:
    from qla_serve import dispatch

    dev = pool.device
    H, HV = layer.num_k_heads // layer.tp_size, layer.num_v_heads // layer.tp_size
    Kd, Vd = layer.head_k_dim, layer.head_v_dim
    raw = torch.empty(0, HV, dtype=act_dtype, device=dev)
    probe = {
        "q": torch.empty(0, H, Kd, dtype=act_dtype, device=dev),
        "k": torch.empty(0, H, Kd, dtype=act_dtype, device=dev),
        "v": torch.empty(0, HV, Vd, dtype=act_dtype, device=dev),
        "g": torch.empty(0, HV, dtype=torch.float32, device=dev),
        "beta": torch.empty(0, HV, dtype=torch.float32, device=dev),
        "out": torch.empty(0, HV, Vd, dtype=act_dtype, device=dev),
        "state_pool": pool, "state_layout": layout, "plan": plan, "checkpoints": None,
        "use_qk_l2norm": False, "null_slot": 0,
        "gates": GateInputs(raw, raw, layer.A_log, layer.dt_bias),   # the adapter's CUDA calls pass them
    }
    refused = []
    for backend in dispatch.BACKENDS:
        if backend.name == "reference":
            continue
        try:
            why = backend.why_not("prefill", probe)
        except Exception as exc:  # a half-installed kernel package must not take the server down
            why = f"check failed: {exc!r}"
        if why is None:
            return None
        refused.append(f"{backend.name}: {why}")
    return ("no qla-serve GPU kernel takes this call (" + "; ".join(refused) + "); vLLM's own kernel "
            "beats qla-serve's PyTorch reference (set QLA_BACKEND=reference to use it anyway)")


# ----------------------------------------------------------------------------------------------
# vLLM's whole GDN core (decode, spec verify, profiling, and fallback)
# ----------------------------------------------------------------------------------------------
FALLBACK_PREFILL_ENV = "QLA_VLLM_FALLBACK_PREFILL"
# vLLM's ChunkGatedDeltaRule binds one of these methods as its _forward_method (vLLM 0.26-0.33):
# forward_cuda = FlashInfer's gdn_prefill, forward_native = FLA's Triton kernels.
_VLLM_PREFILL_METHODS = {"flashinfer": "forward_cuda", "triton": "forward_native"}


def choose_fallback_prefill(layer) -> str | None:
    """``QLA_VLLM_FALLBACK_PREFILL=triton|flashinfer``: the prefill kernel of vLLM's own path in a
    qla-serve server (the steps qla-serve does not take, and the other side of
    ``bench_serving/serve.py``'s paired servers), where vLLM's own choice would be another; unset:
    vLLM's choice. Set the way vLLM sets it (the op's bound forward method), on CUDA only: vLLM's
    CPU build runs its CPU op whatever is chosen. Returns what it did (for one log line), None when
    nothing was asked; a bad value raises ValueError naming the variable."""
    name = os.environ.get(FALLBACK_PREFILL_ENV, "").strip().lower()
    if not name:
        return None
    if name not in _VLLM_PREFILL_METHODS:
        raise ValueError(f"{FALLBACK_PREFILL_ENV}={name!r}: choose one of {', '.join(_VLLM_PREFILL_METHODS)}")
    if not IS_CUDA:
        return f"{FALLBACK_PREFILL_ENV}={name} ignored: vLLM's CPU build has one GDN prefill op"
    op = getattr(layer, "chunk_gated_delta_rule", None)
    method = getattr(op, _VLLM_PREFILL_METHODS[name], None)
    if op is None or method is None:
        raise RuntimeError(f"{FALLBACK_PREFILL_ENV}={name}: this vLLM's GDN layer has no "
                           f"chunk_gated_delta_rule.{_VLLM_PREFILL_METHODS[name]} to bind")
    op._forward_method = method
    op.gdn_prefill_backend = layer.gdn_prefill_backend = name
    return f"vLLM's own GDN prefill path in this server uses its {name} kernel ({FALLBACK_PREFILL_ENV})"


def engine_forward_core(layer, parent_forward_core, mixed_qkv, b, a, core_attn_out) -> None:
    """Run vLLM's own GDN core for this layer, exactly as vLLM would without the plugin."""
    if IS_CPU:
        from vllm.model_executor.layers.mamba.ops.cpu.gdn_attention import cpu_gdn_attention_core

        cpu_gdn_attention_core(mixed_qkv, b, a, core_attn_out, layer.prefix)
    else:
        parent_forward_core(mixed_qkv=mixed_qkv, b=b, a=a, core_attn_out=core_attn_out)


# ----------------------------------------------------------------------------------------------
# Host-side metadata for the batch qla-serve takes (built once per step by the metadata builder)
# ----------------------------------------------------------------------------------------------
def conv_metadata(cu_seqlens_cpu: torch.Tensor, device: torch.device, vllm_md: Any = None) -> Any:
    """vLLM's Triton causal-conv tables for the batch qla-serve takes (CUDA only; CPU needs none).

    ``vllm_md``: vLLM's own GDN metadata of the step. On a step with prefills and no speculative
    tokens its builder already made these tables for its non-spec batch, which is the same
    sequences, so they are reused: computing them again cost 130–310 µs of host time per step
    (CPU machine).
    """
    if device.type != "cuda":
        return None
    if vllm_md is not None and getattr(vllm_md, "nums_dict", None) is not None:
        return SimpleNamespace(nums_dict=vllm_md.nums_dict, batch_ptr=vllm_md.batch_ptr,
                               token_chunk_offset_ptr=vllm_md.token_chunk_offset_ptr)
    from vllm.v1.attention.backends.utils import compute_causal_conv1d_metadata

    nums_dict, batch_ptr, token_chunk_offset_ptr = compute_causal_conv1d_metadata(cu_seqlens_cpu, device=device)
    return SimpleNamespace(nums_dict=nums_dict, batch_ptr=batch_ptr, token_chunk_offset_ptr=token_chunk_offset_ptr)


# ----------------------------------------------------------------------------------------------
# Inputs: vLLM's causal conv (updates vLLM's conv state in place), q/k/v views and the gates
# ----------------------------------------------------------------------------------------------
def conv_prefill(layer, x: torch.Tensor, cu_seqlens: torch.Tensor, state_indices: torch.Tensor,
                 has_initial_state: torch.Tensor, conv_md: Any, plan: Any = None) -> tuple[torch.Tensor, bool]:
    """``x [T, conv_dim]`` → (conv output ``[T, conv_dim]``, whether q/k came out l2-normalised).

    CUDA: vLLM's Triton conv; with ``QLA_VLLM_CONV=qla`` ``qla_serve.gdn_conv`` (vLLM's conv state
    updated in place, q/k normalised, one kernel) unless its kernel refuses the layer. CPU: vLLM's
    CPU conv."""
    if IS_CUDA and conv_choice() == "qla" and _qla_conv_why_not(layer, x) is None:
        from qla_serve import gdn_conv

        conv_state = layer.kv_cache[0]
        H = layer.num_k_heads // layer.tp_size
        out = gdn_conv(
            x, weight=layer.conv1d.weight, bias=layer.conv1d.bias, conv_state=conv_state,
            conv_state_layout="ds" if is_conv_state_dim_first() else "sd", state_indices=state_indices,
            cu_seqlens=cu_seqlens, plan=plan, num_k_heads=H, head_k_dim=layer.head_k_dim,
            head_v_dim=layer.head_v_dim, has_initial_state=has_initial_state, activation=layer.activation,
            l2norm_qk=True, null_slot=0)
        return out, True
    return _engine_conv(layer, x, cu_seqlens, state_indices, has_initial_state, conv_md), False


def _qla_conv_why_not(layer, x: torch.Tensor) -> str | None:
    """Why qla-serve's conv kernel would not take this layer's calls (cached per layer and input form;
    said once by the caller's log). ``QLA_BACKEND`` other than auto is honoured as is."""
    from qla_serve import dispatch

    if dispatch.requested_backend() != "auto":
        return None
    state = layer.kv_cache[0]
    key = (x.dtype, x.stride(0) if x.shape[0] > 1 else None, state.dtype, tuple(state.shape), layer.activation)
    answers = layer.__dict__.setdefault("qla_conv_answers", {})
    if key not in answers:
        try:
            answers[key] = _ask_conv_kernel(layer, x, state)
        except Exception as exc:  # asking must never fail a step: keep vLLM's conv
            answers[key] = f"check failed: {exc!r}"
        if answers[key] is not None:
            import logging

            logging.getLogger("vllm.qla_serve").warning(
                "qla-serve: the GDN causal conv stays on vLLM's kernel (then the op's l2norm pass): %s", answers[key])
    return answers[key]


def _ask_conv_kernel(layer, x: torch.Tensor, state: torch.Tensor) -> str | None:
    from qla_serve import dispatch
    from qla_serve.plan import plan_prefill

    weight = layer.conv1d.weight
    width = weight.shape[-1]
    channels, rows = (state.shape[1], state.shape[2]) if is_conv_state_dim_first() else (state.shape[2], state.shape[1])
    if rows != width - 1:       # speculative decoding widens vLLM's conv state
        return f"vLLM's conv state keeps {rows} rows, not the conv width − 1 = {width - 1} gdn_conv keeps"
    if channels != x.shape[1] or tuple(state.stride()[1:]) != (state.shape[2], 1):
        return f"vLLM's conv state {tuple(state.shape)} (strides {state.stride()}) is not rows of {x.shape[1]} channels"
    probe = dict(x=x[:0], weight=weight.view(weight.size(0), -1), bias=layer.conv1d.bias, conv_state=state,
                 activation=layer.activation, head_k_dim=layer.head_k_dim,
                 qk_channels=2 * (layer.num_k_heads // layer.tp_size) * layer.head_k_dim,
                 out=torch.empty(0, x.shape[1], dtype=x.dtype, device=x.device), plan=plan_prefill([0, 0], device="meta"))
    try:
        return next(b for b in dispatch.BACKENDS if b.name == "tilelang").why_not("conv", probe)
    except Exception as exc:  # a half-installed kernel package must not take the server down
        return f"check failed: {exc!r}"


def _engine_conv(layer, x: torch.Tensor, cu_seqlens: torch.Tensor, state_indices: torch.Tensor,
                 has_initial_state: torch.Tensor, conv_md: Any) -> torch.Tensor:
    """vLLM's own causal conv for this platform."""
    weight = layer.conv1d.weight
    if IS_CPU:
        from vllm.model_executor.layers.mamba.ops.cpu import gdn_attention as cpu_gdn

        conv_state = layer.kv_cache[0]
        # Same predicate vLLM's CPU build packs the conv weight on at load time.
        if torch.cpu._is_avx512_bf16_supported() or cpu_gdn.is_arm_bf16():
            if not is_conv_state_dim_first():
                conv_state = conv_state.transpose(1, 2)
            out = cpu_gdn._causal_conv1d_fwd_cpu(
                x=x.transpose(0, 1), weight=weight, bias=layer.conv1d.bias, conv_states=conv_state,
                query_start_loc=cu_seqlens, cache_indices=state_indices,
                has_initial_state=has_initial_state, silu_activation=layer.activation == "silu",
                is_weight_packed=True)
        else:
            if not is_conv_state_dim_first():
                conv_state = conv_state.transpose(-1, -2)
            out = cpu_gdn.causal_conv1d_torch(
                x=x.transpose(0, 1), weight=weight.view(weight.size(0), weight.size(2)),
                bias=layer.conv1d.bias, conv_states=conv_state, query_start_loc=cu_seqlens,
                cache_indices=state_indices, has_initial_state=has_initial_state,
                activation=layer.activation)
        return out.transpose(0, 1)

    from vllm.model_executor.layers.mamba.ops.causal_conv1d import causal_conv1d_fn

    conv_state = layer.kv_cache[0] if is_conv_state_dim_first() else layer.kv_cache[0].transpose(-1, -2)
    return causal_conv1d_fn(
        x.transpose(0, 1), weight.view(weight.size(0), weight.size(2)), layer.conv1d.bias,
        activation=layer.activation, conv_states=conv_state, has_initial_state=has_initial_state,
        cache_indices=state_indices, query_start_loc=cu_seqlens, metadata=conv_md,
    ).transpose(0, 1)


def prefill_inputs(layer, conv_out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, normalised: bool = False):
    """``(q, k, v, gates, l2norm_in_op)``: q/k/v are views of the conv output (rows of
    ``[q | k | v]``), l2-normalised by the op unless the conv did it (``normalised``); ``gates``:
    the keyword arguments ``gdn_prefill`` takes the gates by.

    CUDA: ``{"gates": GateInputs(a, b, A_log, dt_bias)}``: the op computes g and β in its l2norm
    pass (no launch, no op call of their own). vLLM's own ``fused_post_conv_prep`` would also
    normalise q/k, but it copies all of q, k and v to do it (2·(2·H·K + HV·V) bytes a token moved);
    the op's normalising pass moves q and k only (``QLA_VLLM_PREP=vllm`` keeps vLLM's prep, for A/B
    runs). CPU: ``{"g", "beta"}`` from vLLM's CPU gating op; qla-serve's reference normalises q/k."""
    H, HV = layer.num_k_heads // layer.tp_size, layer.num_v_heads // layer.tp_size
    Kd, Vd = layer.head_k_dim, layer.head_v_dim
    if IS_CUDA and os.environ.get(PREP_ENV, "qla") == "vllm" and not normalised:
        from vllm.third_party.flash_linear_attention.ops import fused_post_conv_prep

        q, k, v, g, beta = fused_post_conv_prep(
            conv_output=conv_out, a=a, b=b, A_log=layer.A_log, dt_bias=layer.dt_bias, num_k_heads=H,
            head_k_dim=Kd, head_v_dim=Vd, apply_l2norm=True, output_g_exp=False)
        return q, k, v, {"g": g, "beta": beta}, False
    q = conv_out[:, :H * Kd].unflatten(1, (H, Kd))
    k = conv_out[:, H * Kd:2 * H * Kd].unflatten(1, (H, Kd))
    v = conv_out[:, 2 * H * Kd:2 * H * Kd + HV * Vd].unflatten(1, (HV, Vd))
    if IS_CPU:
        from vllm import _custom_ops as ops

        g, beta = ops.fused_gdn_gating_cpu(A_log=layer.A_log, a=a.contiguous(), b=b.contiguous(),
                                           dt_bias=layer.dt_bias)
        return q, k, v, {"g": g, "beta": beta}, not normalised
    return q, k, v, {"gates": GateInputs(a, b, layer.A_log, layer.dt_bias)}, not normalised


def state_pool(layer) -> tuple[torch.Tensor, str]:
    """vLLM's recurrent-state cache for this layer as ``(pool, state_layout)``, no copy.

    CUDA kernels use ``[slots, HV, V, K]``. vLLM's CPU kernels reinterpret the same buffer as
    ``[slots, HV, K, V]`` (a ``view``, not a transpose), so on CPU the rows are "kv".
    """
    ssm = layer.kv_cache[1]
    if IS_CPU:
        n, hv, vd, kd = ssm.shape
        return ssm.view(n, hv, kd, vd), "kv"
    return ssm, "vk"
