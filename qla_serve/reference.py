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

from .plan import PrefillPlan, plan_prefill


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x / sqrt(Σx² + eps)`` over the last dim (FLA's convention)."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def gating_reference(a: torch.Tensor, b: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor,
                     g: torch.Tensor, beta: torch.Tensor, threshold: float) -> None:
    """``g = −exp(A_log)·softplus(a + dt_bias)`` (softplus(x) = x above ``threshold``), ``beta =
    sigmoid(b)``, fp32 math, written into ``g`` and ``beta``."""
    x = a.float() + dt_bias.float()
    g.copy_(-A_log.float().exp() * torch.nn.functional.softplus(x, beta=1.0, threshold=threshold))
    beta.copy_(torch.sigmoid(b.float()))


def conv_reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, conv_state: torch.Tensor,
                   conv_state_layout: str, state_indices: torch.Tensor, has_initial_state: torch.Tensor | None,
                   plan: PrefillPlan, out: torch.Tensor, qk_channels: int, head_k_dim: int, l2norm_qk: bool,
                   activation: str | None, null_slot: int | None) -> None:
    """Reference backend for :func:`qla_serve.gdn_conv` (validated inputs; writes ``out`` and the live
    sequences' conv state rows). Per sequence, in fp32: xx = [its state rows (zero without an initial
    state), its tokens], y[t] = bias + Σ_j w[:, j]·xx[t + j], silu, the first ``qk_channels`` channels
    l2-normalised per head of ``head_k_dim``; the new state is xx's last W − 1 rows."""
    N = plan.num_seqs
    S = weight.shape[-1] - 1
    w = weight.float()
    slots = _host_list(state_indices, N, -1)
    has_init = _host_list(has_initial_state, N, True)
    cu = plan.cu_seqlens_cpu.tolist()
    for n in range(N):
        s0, s1 = cu[n], cu[n + 1]
        live = slots[n] >= 0 and (null_slot is None or slots[n] != null_slot)
        if live and has_init[n]:
            rows = conv_state[slots[n]]
            rows = (rows if conv_state_layout == "sd" else rows.transpose(0, 1)).float()
        else:
            rows = torch.zeros(S, x.shape[1], device=x.device)
        xx = torch.cat([rows, x[s0:s1].float()])
        L = s1 - s0
        y = sum(w[:, j] * xx[j:j + L] for j in range(S + 1))
        if bias is not None:
            y = y + bias.float()
        if activation == "silu":
            y = torch.nn.functional.silu(y)
        if l2norm_qk and qk_channels:
            qk = y[:, :qk_channels].unflatten(1, (-1, head_k_dim))
            y = torch.cat([l2norm(qk).flatten(1), y[:, qk_channels:]], dim=1)
        out[s0:s1] = y.to(out.dtype)
        if live:
            new = xx[-S:].to(conv_state.dtype)
            conv_state[slots[n]] = new if conv_state_layout == "sd" else new.transpose(0, 1)


def pool_to_kv(rows: torch.Tensor, state_layout: str) -> torch.Tensor:
    """Pool rows ``[..., HV, V, K]`` ("vk") or ``[..., HV, K, V]`` ("kv") → math layout [..., K, V]."""
    return rows.transpose(-1, -2) if state_layout == "vk" else rows


def kv_to_pool(state: torch.Tensor, state_layout: str) -> torch.Tensor:
    return state.transpose(-1, -2) if state_layout == "vk" else state


def _chunk_layout(plan: PrefillPlan, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """Host-built tables for the chunk-packed layout (every chunk padded to C tokens).

    Returns the token index of every (chunk, position) [NT, C] (clamped; padding points at token 0),
    a validity mask [NT, C], and for each chunk position j the sequences that have a chunk j.
    """
    C = plan.chunk_size
    seqlens = torch.tensor(plan.seqlens, dtype=torch.long)
    nchunks = (seqlens + C - 1) // C
    cu = plan.cu_seqlens_cpu.long()
    offs = plan.chunk_offsets_cpu.long()
    chunk_seq = torch.repeat_interleave(torch.arange(plan.num_seqs), nchunks)
    chunk_pos = torch.arange(plan.num_chunks) - offs[chunk_seq]
    tok = (cu[chunk_seq] + chunk_pos * C)[:, None] + torch.arange(C)
    valid = tok < cu[chunk_seq + 1][:, None]
    tok = torch.where(valid, tok, 0)
    max_nc = int(nchunks.max()) if plan.num_seqs else 0
    walk = [torch.nonzero(nchunks > j).flatten().to(device) for j in range(max_nc)]
    return tok.to(device), valid.to(device), walk


def _host_list(x: torch.Tensor | None, n: int, default) -> list:
    if x is None:
        return [default] * n
    return x.tolist()  # a sync on GPU: the reference backend is the portable path


def _one_step(q, k, v, g, beta, S, ids, scale: float, use_qk_l2norm: bool) -> torch.Tensor:
    """One recurrence step for the sequences ``ids`` (one token each; their rows of q/k/v/g/beta):
    ``S ← e^g S + k uᵀ`` with ``u = β (v − Sᵀ k)`` on the decayed S, output ``Sᵀ q · scale``. Updates
    ``S[ids]``; returns ``[n, HV, V]`` fp32 (what a one-token chunk computes)."""
    hv = v.shape[1]
    qf, kf, vf = q.float(), k.float(), v.float()
    if use_qk_l2norm:
        qf, kf = l2norm(qf), l2norm(kf)
    rep = hv // qf.shape[1]
    qf, kf = qf.repeat_interleave(rep, 1) * scale, kf.repeat_interleave(rep, 1)
    Sn = S[ids] * torch.exp(g.float())[..., None, None]
    u = beta.float()[..., None] * (vf - torch.einsum("nhkv,nhk->nhv", Sn, kf))
    Sn = Sn + kf[..., None] * u[..., None, :]
    S[ids] = Sn
    return torch.einsum("nhkv,nhk->nhv", Sn, qf)


def _chunked(q, k, v, g, beta, S, plan: PrefillPlan, scale: float, use_qk_l2norm: bool, out: torch.Tensor,
             checkpoints: torch.Tensor | None, state_layout: str) -> None:
    """The chunked algebra and walk for every sequence of ``plan`` (``S`` indexed like its sequences)."""
    dev, C, NT = q.device, plan.chunk_size, plan.num_chunks
    hv, Vd = v.shape[1], v.shape[-1]
    if NT:
        tok, valid, walk = _chunk_layout(plan, dev)
        mask = valid.float()

        def packed(x: torch.Tensor) -> torch.Tensor:   # [T, heads, ...] → [NT, HV, C, ...], zero padding
            y = x[tok].float()
            y = y * mask.view(NT, C, *([1] * (y.dim() - 2)))
            if y.dim() == 4 and y.shape[2] != hv:
                y = y.repeat_interleave(hv // y.shape[2], dim=2)
            return y.transpose(1, 2)

        qc, kc, vc = packed(q), packed(k), packed(v)          # [NT, HV, C, K|V]
        if use_qk_l2norm:
            qc, kc = l2norm(qc), l2norm(kc)
        qc = qc * scale
        gamma = packed(g).cumsum(-1)                          # [NT, HV, C]; padding: g = 0, β = 0
        bc = packed(beta)
        incl = torch.ones(C, C, dtype=torch.bool, device=dev).tril()
        diff = gamma.unsqueeze(-1) - gamma.unsqueeze(-2)      # γ_i − γ_j
        decay = torch.exp(diff.masked_fill(~incl, float("-inf")))        # D_incl, zero above diag
        strict = decay.masked_fill(torch.eye(C, dtype=torch.bool, device=dev), 0.0)
        kb = kc * bc.unsqueeze(-1)
        A = torch.eye(C, device=dev) + (kb @ kc.transpose(-1, -2)) * strict
        rhs = torch.cat([vc * bc.unsqueeze(-1), kb * torch.exp(gamma).unsqueeze(-1)], dim=-1)
        sol = torch.linalg.solve_triangular(A, rhs, upper=False, unitriangular=True)
        u0, w = sol[..., :Vd], sol[..., Vd:]
        qk = (qc @ kc.transpose(-1, -2)) * decay
        q_decayed = qc * torch.exp(gamma).unsqueeze(-1)
        k_to_end = kc * torch.exp(gamma[..., -1:] - gamma).unsqueeze(-1)
        end_decay = torch.exp(gamma[..., -1])[..., None, None]

        o = torch.empty(NT, hv, C, Vd, device=dev)
        offs = plan.chunk_offsets.long()          # the plan lives on q.device (checked by the op)
        for j, seqs in enumerate(walk):
            ch = offs[seqs] + j
            Sj = S[seqs]
            if checkpoints is not None:
                checkpoints[0, ch] = kv_to_pool(Sj, state_layout).to(checkpoints.dtype)
            u = u0[ch] - w[ch] @ Sj
            o[ch] = q_decayed[ch] @ Sj + qk[ch] @ u
            S[seqs] = end_decay[ch] * Sj + k_to_end[ch].transpose(-1, -2) @ u
        o = o.transpose(1, 2).reshape(NT * C, hv, Vd)
        flat_valid = valid.flatten()
        out.index_copy_(0, tok.flatten()[flat_valid], o[flat_valid].to(out.dtype))


def prefill_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, *,
    state_pool: torch.Tensor, state_indices: torch.Tensor, has_initial_state: torch.Tensor | None,
    plan: PrefillPlan, scale: float, use_qk_l2norm: bool, out: torch.Tensor, state_layout: str,
    null_slot: int | None, checkpoints: torch.Tensor | None, gates=None,
) -> None:
    """Reference backend for :func:`qla_serve.gdn_prefill` (validated 3-D inputs; writes out, pool).
    With ``gates`` (``GateInputs``), ``g`` and ``beta`` are buffers filled from them first.

    All chunks of all sequences are packed into one [NT, HV, C, ...] batch for the intra-chunk
    algebra; the serial state walk then advances every sequence's j-th chunk together. One-token
    sequences (an engine's decodes riding in a prefill call) take one recurrence step instead: as
    chunks each would cost a whole 64-token chunk's algebra (CPU machine, heads 2/4: 15 decodes
    beside a 497-token chunk took 22 ms a call that way, 11 ms this way).
    """
    if gates is not None:
        gating_reference(gates.a, gates.b, gates.A_log, gates.dt_bias, g, beta, gates.softplus_threshold)
    dev, N = q.device, plan.num_seqs
    hv, Kd, Vd = v.shape[1], k.shape[-1], v.shape[-1]
    slots = _host_list(state_indices, N, -1)
    has_init = _host_list(has_initial_state, N, True)
    live = [s >= 0 and (null_slot is None or s != null_slot) for s in slots]
    reads = [i for i in range(N) if live[i] and has_init[i]]

    S = torch.zeros(N, hv, Kd, Vd, device=dev)
    if reads:
        rows = torch.tensor([slots[i] for i in reads], device=dev)
        S[torch.tensor(reads, device=dev)] = pool_to_kv(state_pool[rows], state_layout).float()

    single = [i for i, n in enumerate(plan.seqlens) if n == 1] if checkpoints is None else []
    if not single:
        _chunked(q, k, v, g, beta, S, plan, scale, use_qk_l2norm, out, checkpoints, state_layout)
    else:
        cu_list = plan.cu_seqlens_cpu.tolist()
        ones = torch.tensor(single, device=dev)
        at = torch.tensor([cu_list[i] for i in single], device=dev)
        out[at] = _one_step(q[at], k[at], v[at], g[at], beta[at], S, ones, scale, use_qk_l2norm).to(out.dtype)
        multi = [i for i, n in enumerate(plan.seqlens) if n != 1]
        if multi:
            lens = [plan.seqlens[i] for i in multi]
            rows = torch.cat([torch.arange(cu_list[i], cu_list[i + 1]) for i in multi]).to(dev)
            sub = plan_prefill(torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32), device=dev)
            ids = torch.tensor(multi, device=dev)
            S_multi = S[ids]
            out_multi = torch.empty(rows.shape[0], hv, Vd, dtype=out.dtype, device=dev)
            _chunked(q[rows], k[rows], v[rows], g[rows], beta[rows], S_multi, sub, scale, use_qk_l2norm,
                     out_multi, None, state_layout)
            S[ids] = S_multi
            out[rows] = out_multi

    cu = plan.cu_seqlens_cpu.tolist()
    offs_cpu = plan.chunk_offsets_cpu.tolist()
    for i in range(N):
        if not live[i]:
            out[cu[i]:cu[i + 1]].zero_()
            if checkpoints is not None:
                checkpoints[0, offs_cpu[i]:offs_cpu[i + 1]].zero_()
    writes = [i for i in range(N) if live[i]]
    if writes:
        rows = torch.tensor([slots[i] for i in writes], device=dev)
        state_pool[rows] = kv_to_pool(S[torch.tensor(writes, device=dev)], state_layout).to(state_pool.dtype)


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
    rep = hv // q.shape[1]
    qf = q[valid].float().repeat_interleave(rep, dim=1)          # [n, HV, K]
    kf = k[valid].float().repeat_interleave(rep, dim=1)
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
    scale: float | None = None, use_qk_l2norm: bool = False, device: torch.device | str = "cpu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """The fp64 oracle, token by token (on the CPU unless ``device`` says otherwise).

    q, k [T, H, K]; v [T, HV, V]; g, beta [T, HV]; initial_state [N, HV, K, V] (math layout) or None.
    Returns o [T, HV, V] and final states [N, HV, K, V], both fp64, on ``device``.

    Every sequence advances one token per step (longest first, so the sequences still running are
    a prefix of the batch): a batch of many short sequences costs its longest length in steps, not
    its total. The GPU tests run it on the GPU: on the CPU it was most of their time (306 s for
    20 cases on the H200 machine, session 9).
    """
    T, H, Kd = q.shape
    HV, Vd = v.shape[1], v.shape[2]
    scale = Kd ** -0.5 if scale is None else scale
    dev = torch.device(device)
    qd, kd, vd, gd, bd = (x.detach().to(dev, torch.float64) for x in (q, k, v, g, beta))
    if use_qk_l2norm:
        qd, kd = l2norm(qd), l2norm(kd)
    rep = HV // H
    qd, kd = qd.repeat_interleave(rep, 1), kd.repeat_interleave(rep, 1)
    cu = [int(c) for c in cu_seqlens]
    N = len(cu) - 1
    lens = [cu[i + 1] - cu[i] for i in range(N)]
    order = sorted(range(N), key=lambda i: -lens[i])
    o = torch.zeros(T, HV, Vd, dtype=torch.float64, device=dev)
    S = torch.zeros(N, HV, Kd, Vd, dtype=torch.float64, device=dev)   # in `order`
    if initial_state is not None:
        S.copy_(initial_state.detach()[order].to(dev, torch.float64))
    starts = torch.tensor([cu[i] for i in order], dtype=torch.long, device=dev)
    running = N
    for t in range(max(lens, default=0)):
        while lens[order[running - 1]] <= t:
            running -= 1
        tok = starts[:running] + t
        St = S[:running]                                    # a view: updated in place
        St.mul_(torch.exp(gd[tok])[..., None, None])
        kt = kd[tok]
        u = bd[tok][..., None] * (vd[tok] - torch.einsum("nhkv,nhk->nhv", St, kt))
        St.add_(kt[..., None] * u[..., None, :])
        o[tok] = scale * torch.einsum("nhkv,nhk->nhv", St, qd[tok])
    finals = torch.empty_like(S)
    finals[order] = S
    return o, finals
