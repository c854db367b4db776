"""Pure-PyTorch GDN: the chunked fp32 reference backend (any device) and the fp64 token oracle.

Math (per value head, state S ∈ R^{K×V}):
    S_t = e^{g_t} S_{t-1};  u_t = β_t (v_t − S_tᵀ k_t);  S_t += k_t u_tᵀ;  o_t = scale · S_tᵀ q_t

Chunked form (C tokens, γ = chunk-local cumsum of g, D_ij = e^{γ_i − γ_j} for i ≥ j):
    A = I + StrictLower(diag(β) K Kᵀ ⊙ D)
    U = A⁻¹ diag(β) V − A⁻¹ diag(β e^γ) K S_0          (= U0 − W S_0)
    O = scale · [diag(e^γ) Q S_0 + (Q Kᵀ ⊙ D_incl) U]
    S_C = e^{γ_C} S_0 + (K ⊙ e^{γ_C − γ})ᵀ U
Only differences γ_i − γ_j with i ≥ j are exponentiated (never e^{−γ}): gates can reach −hundreds.

The reference backend reads slot indices to the host (a sync on GPU): it is the correct, portable
path, not the fast one.
"""
from __future__ import annotations

from typing import Sequence

import torch

from .plan import PrefillPlan


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x / sqrt(Σx² + eps)`` over the last dim (FLA's convention)."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def pool_to_kv(rows: torch.Tensor, state_layout: str) -> torch.Tensor:
    """Pool rows ``[..., HV, V, K]`` ("vk") or ``[..., HV, K, V]`` ("kv") → math layout [..., K, V]."""
    return rows.transpose(-1, -2) if state_layout == "vk" else rows


def kv_to_pool(state: torch.Tensor, state_layout: str) -> torch.Tensor:
    return state.transpose(-1, -2) if state_layout == "vk" else state


def _expand_heads(x: torch.Tensor, hv: int) -> torch.Tensor:
    """[L, H, K] → [HV, L, K]: value head i uses key head i // (HV // H)."""
    h = x.shape[1]
    if h != hv:
        x = x.repeat_interleave(hv // h, dim=1)
    return x.transpose(0, 1)


def chunked_sequence(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
    state: torch.Tensor, *, scale: float, use_qk_l2norm: bool, chunk_size: int = 64,
    checkpoints: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One sequence in fp32. q, k [L, H, K]; v [L, HV, V]; g, beta [L, HV]; state [HV, K, V] fp32.

    Returns o [L, HV, V] fp32 and the final state [HV, K, V] fp32. If given, ``checkpoints``
    [NC, HV, K, V] receives the state before each chunk.
    """
    L, hv = v.shape[0], v.shape[1]
    C = chunk_size
    qf = _expand_heads(q.float(), hv)
    kf = _expand_heads(k.float(), hv)
    if use_qk_l2norm:
        qf, kf = l2norm(qf), l2norm(kf)
    qf = qf * scale
    vf = v.float().transpose(0, 1)                      # [HV, L, V]
    gf = g.float().transpose(0, 1)                      # [HV, L]
    bf = beta.float().transpose(0, 1)
    nc = (L + C - 1) // C
    pad = nc * C - L
    if pad:
        # Padded tokens: k = v = 0, β = 0, g = 0 → no update, no decay; final state is unaffected.
        qf, kf, vf = (torch.nn.functional.pad(x, (0, 0, 0, pad)) for x in (qf, kf, vf))
        gf, bf = (torch.nn.functional.pad(x, (0, pad)) for x in (gf, bf))
    Kd, Vd = kf.shape[-1], vf.shape[-1]
    qc, kc, vc = (x.reshape(hv, nc, C, x.shape[-1]) for x in (qf, kf, vf))
    gamma = gf.reshape(hv, nc, C).cumsum(-1)
    bc = bf.reshape(hv, nc, C)

    incl = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    diff = gamma.unsqueeze(-1) - gamma.unsqueeze(-2)    # γ_i − γ_j
    decay = torch.exp(diff.masked_fill(~incl, float("-inf")))          # D_incl, zero above diag
    strict = decay.masked_fill(torch.eye(C, dtype=torch.bool, device=q.device), 0.0)

    kb = kc * bc.unsqueeze(-1)
    A = torch.eye(C, device=q.device) + (kb @ kc.transpose(-1, -2)) * strict
    rhs = torch.cat([vc * bc.unsqueeze(-1), kb * torch.exp(gamma).unsqueeze(-1)], dim=-1)
    sol = torch.linalg.solve_triangular(A, rhs, upper=False, unitriangular=True)
    u0, w = sol[..., :Vd], sol[..., Vd:]
    qk = (qc @ kc.transpose(-1, -2)) * decay
    q_decayed = qc * torch.exp(gamma).unsqueeze(-1)
    k_to_end = kc * torch.exp(gamma[..., -1:] - gamma).unsqueeze(-1)
    end_decay = torch.exp(gamma[..., -1])               # [HV, NC]

    o = torch.empty(hv, nc, C, Vd, device=q.device)
    S = state
    for c in range(nc):
        if checkpoints is not None:
            checkpoints[c] = S
        u = u0[:, c] - w[:, c] @ S
        o[:, c] = q_decayed[:, c] @ S + qk[:, c] @ u
        S = end_decay[:, c, None, None] * S + k_to_end[:, c].transpose(-1, -2) @ u
    return o.reshape(hv, nc * C, Vd)[:, :L].transpose(0, 1), S


def _host_list(x: torch.Tensor | None, n: int, default) -> list:
    if x is None:
        return [default] * n
    return x.tolist()  # a sync on GPU: the reference backend is the portable path


def prefill_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, *,
    state_pool: torch.Tensor, state_indices: torch.Tensor, has_initial_state: torch.Tensor | None,
    plan: PrefillPlan, scale: float, use_qk_l2norm: bool, out: torch.Tensor, state_layout: str,
    null_slot: int | None, checkpoints: torch.Tensor | None,
) -> None:
    """Reference backend for :func:`qla_serve.gdn_prefill` (validated 3-D inputs; writes out, pool)."""
    n = plan.num_seqs
    slots = _host_list(state_indices, n, -1)
    has_init = _host_list(has_initial_state, n, True)
    hv = v.shape[1]
    Kd, Vd = k.shape[-1], v.shape[-1]
    finals: list[tuple[int, torch.Tensor]] = []
    cu = plan.cu_seqlens_cpu.tolist()
    offs = plan.chunk_offsets_cpu.tolist()
    for i in range(n):
        a, b = cu[i], cu[i + 1]
        slot = slots[i]
        skip = slot < 0 or (null_slot is not None and slot == null_slot)
        if skip:
            out[a:b].zero_()
            if checkpoints is not None:
                checkpoints[0, offs[i]:offs[i + 1]].zero_()
            continue
        if has_init[i]:
            s0 = pool_to_kv(state_pool[slot], state_layout).float()
        else:
            s0 = torch.zeros(hv, Kd, Vd, device=q.device)
        if b == a:  # an empty sequence carries its state through unchanged
            finals.append((slot, s0))
            continue
        ck = None
        if checkpoints is not None:
            ck = torch.empty(offs[i + 1] - offs[i], hv, Kd, Vd, device=q.device)
        o, s = chunked_sequence(q[a:b], k[a:b], v[a:b], g[a:b], beta[a:b], s0, scale=scale,
                                use_qk_l2norm=use_qk_l2norm, chunk_size=plan.chunk_size,
                                checkpoints=ck)
        out[a:b] = o.to(out.dtype)
        if ck is not None:
            checkpoints[0, offs[i]:offs[i + 1]] = kv_to_pool(ck, state_layout).to(checkpoints.dtype)
        finals.append((slot, s))
    # States go back only after every sequence has read its own: no read-after-write surprises.
    for slot, s in finals:
        state_pool[slot] = kv_to_pool(s, state_layout).to(state_pool.dtype)


def decode_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, *,
    state_pool: torch.Tensor, state_indices: torch.Tensor, scale: float, use_qk_l2norm: bool,
    out: torch.Tensor, state_layout: str, null_slot: int | None,
) -> None:
    """One token per sequence: q, k [N, H, K]; v [N, HV, V]; g, beta [N, HV]."""
    hv = v.shape[1]
    valid = state_indices >= 0
    if null_slot is not None:
        valid &= state_indices != null_slot
    rows = state_indices[valid].long()
    qf = _expand_heads(q[valid].float(), hv).transpose(0, 1)   # [n, HV, K]
    kf = _expand_heads(k[valid].float(), hv).transpose(0, 1)
    if use_qk_l2norm:
        qf, kf = l2norm(qf), l2norm(kf)
    S = pool_to_kv(state_pool[rows], state_layout).float()     # [n, HV, K, V]
    S = S * torch.exp(g[valid].float())[..., None, None]
    pred = (S * kf.unsqueeze(-1)).sum(-2)                        # Sᵀ k
    u = beta[valid].float().unsqueeze(-1) * (v[valid].float() - pred)
    S = S + kf.unsqueeze(-1) * u.unsqueeze(-2)
    o = scale * (S * qf.unsqueeze(-1)).sum(-2)
    out.zero_()
    out[valid] = o.to(out.dtype)
    state_pool[rows] = kv_to_pool(S, state_layout).to(state_pool.dtype)


def token_recurrence(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
    cu_seqlens: Sequence[int], initial_state: torch.Tensor | None = None, *,
    scale: float | None = None, use_qk_l2norm: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The fp64 oracle, token by token, on the CPU.

    q, k [T, H, K]; v [T, HV, V]; g, beta [T, HV]; initial_state [N, HV, K, V] (math layout) or None.
    Returns o [T, HV, V] and final states [N, HV, K, V], both fp64.
    """
    T, H, Kd = q.shape
    HV, Vd = v.shape[1], v.shape[2]
    scale = Kd ** -0.5 if scale is None else scale
    qd, kd, vd, gd, bd = (x.detach().to("cpu", torch.float64) for x in (q, k, v, g, beta))
    if use_qk_l2norm:
        qd, kd = l2norm(qd), l2norm(kd)
    rep = HV // H
    qd, kd = qd.repeat_interleave(rep, 1), kd.repeat_interleave(rep, 1)
    cu = [int(c) for c in cu_seqlens]
    N = len(cu) - 1
    o = torch.zeros(T, HV, Vd, dtype=torch.float64)
    finals = torch.zeros(N, HV, Kd, Vd, dtype=torch.float64)
    for i in range(N):
        S = (initial_state[i].detach().to("cpu", torch.float64).clone()
             if initial_state is not None else torch.zeros(HV, Kd, Vd, dtype=torch.float64))
        for t in range(cu[i], cu[i + 1]):
            S = S * torch.exp(gd[t])[:, None, None]
            u = bd[t][:, None] * (vd[t] - torch.einsum("hkv,hk->hv", S, kd[t]))
            S = S + kd[t][:, :, None] * u[:, None, :]
            o[t] = scale * torch.einsum("hkv,hk->hv", S, qd[t])
        finals[i] = S
    return o, finals
