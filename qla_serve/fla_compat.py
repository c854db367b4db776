"""FLA-compatible entry point: switch from ``fla.ops.gated_delta_rule`` by changing one import."""
from __future__ import annotations

import torch

from .api import gdn_prefill
from .plan import plan_prefill

_UNSUPPORTED_FLAGS = ("use_gate_in_kernel", "use_beta_sigmoid_in_kernel", "allow_neg_eigval", "cp_context")


def chunk_gated_delta_rule(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
    scale: float | None = None, initial_state: torch.Tensor | None = None,
    output_final_state: bool = False, cu_seqlens: torch.Tensor | None = None,
    use_qk_l2norm_in_kernel: bool = False, state_v_first: bool = False,
    cu_seqlens_cpu: torch.Tensor | None = None, chunk_indices: torch.Tensor | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """FLA 0.6.0's signature and semantics (forward only).

    q, k ``[B, T, H, K]``; v ``[B, T, HV, V]``; g, beta ``[B, T, HV]``; ``initial_state``
    ``[N, HV, K, V]`` (``[N, HV, V, K]`` with ``state_v_first``). With ``cu_seqlens``, B must be 1.
    Returns ``(o [B, T, HV, V], final_state [N, HV, K, V] fp32 or None)``. ``chunk_indices`` is
    accepted and ignored (the plan rebuilds it from ``cu_seqlens_cpu`` when given).
    """
    for flag in _UNSUPPORTED_FLAGS:
        if kwargs.get(flag):
            raise NotImplementedError(f"qla_serve.chunk_gated_delta_rule does not support {flag}")
    if kwargs.get("chunk_size", 64) != 64:
        raise NotImplementedError("qla_serve.chunk_gated_delta_rule supports chunk_size=64 only")
    if q.dim() != 4:
        raise ValueError(f"q must be [B, T, H, K], got shape {tuple(q.shape)}")
    B, T = q.shape[:2]
    HV, Kd, Vd = v.shape[2], q.shape[3], v.shape[3]
    dev = q.device
    if cu_seqlens is not None:
        if B != 1:
            raise ValueError(f"batch size must be 1 with cu_seqlens, got {B}")
        host_cu = cu_seqlens_cpu if cu_seqlens_cpu is not None else cu_seqlens.cpu()
        cu = cu_seqlens
    else:
        host_cu = torch.arange(B + 1, dtype=torch.int64) * T
        cu = host_cu.to(dev)
        q, k, v, g, beta = (x.reshape(1, B * T, *x.shape[2:]) for x in (q, k, v, g, beta))
    N = host_cu.shape[0] - 1
    state_shape = (N, HV, Vd, Kd) if state_v_first else (N, HV, Kd, Vd)
    if initial_state is not None:
        if tuple(initial_state.shape) != state_shape:
            raise ValueError(f"initial_state must have shape {state_shape}, got {tuple(initial_state.shape)}")
        pool = initial_state.detach().to(torch.float32).contiguous().clone()
    else:
        pool = torch.empty(state_shape, dtype=torch.float32, device=dev)
    plan = plan_prefill(host_cu, device=dev)
    o = gdn_prefill(
        q, k, v, g, beta, state_pool=pool, state_indices=torch.arange(N, device=dev, dtype=torch.int32),
        cu_seqlens=cu, has_initial_state=torch.full((N,), initial_state is not None, device=dev),
        plan=plan, scale=scale, use_qk_l2norm=use_qk_l2norm_in_kernel,
        state_layout="vk" if state_v_first else "kv",
    )
    return o.reshape(B, T, HV, Vd), (pool if output_final_state else None)
