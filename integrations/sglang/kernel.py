"""SGLang kernel adapter: GDN extend (chunked prefill) through :func:`qla_serve.gdn_prefill`.

Translates SGLang's ``LinearAttnKernelBase.extend`` call into the op contract; no math here.
Decode and target-verify never reach this class: the dispatcher keeps SGLang's Triton kernel for
them (see ``hooks.py``), so there is exactly one seam, extend.
"""
from __future__ import annotations

import logging
from typing import Sequence

import torch
from sglang.srt.layers.attention.linear.kernels.kernel_backend import LinearAttnKernelBase

from qla_serve.api import gdn_prefill
from qla_serve.plan import PrefillPlan, plan_prefill
from qla_serve.warmup import preload

logger = logging.getLogger("qla_serve.sglang")


class QLAGDNKernel(LinearAttnKernelBase):
    """GDN extend on SGLang's own state pool, in place.

    SGLang's call: q, k ``[1, T, H, K]`` and v ``[1, T, HV, V]`` (possibly strided views of one
    packed ``mixed_qkv``, or ``[T, ...]``), g, beta ``[1, T, HV]`` fp32, ``ssm_states`` the pool
    ``[slots+1, HV, V, K]`` (fp32 or bf16), ``cache_indices`` ``[N]`` (negative = padding: skipped,
    zero output, no row touched), ``query_start_loc`` ``[N+1]``. q/k are l2-normalised and scaled
    by K^-0.5 in the op, as SGLang's Triton kernel does (``use_qk_l2norm_in_kernel=True``).
    Every sequence reads its pool row as the initial state (new requests get a zeroed slot).

    Returns ``(o [1, T, HV, V], None, None)``: the final state is already in the pool, and the
    per-chunk states SGLang's radix cache wants are delivered as a snapshot into ``track_state``
    (``supports_track_state_snapshot``), so ``h`` is never needed.
    """

    # SGLang hands extend() an fp32 ``track_state`` [N, HV, V, K] plus ``track_chunk_idx`` [N]
    # whenever the radix cache (extra_buffer) must checkpoint a state at a chunk boundary; we fill
    # it from qla_serve's per-chunk checkpoints, so returning ``h`` is unnecessary.
    supports_track_state_snapshot: bool = True
    uses_state_checkpoints: bool = False

    def __init__(self) -> None:
        # Host-side extend lengths of the forward in flight, set by the GDNAttnBackend.forward_extend
        # hook. With them the plan is built without reading query_start_loc back from the device.
        self.host_seqlens: Sequence[int] | None = None
        self._plan_key: tuple | None = None
        self._plan: PrefillPlan | None = None
        self._preload_asked = False

    # -- the seam: decode and verify stay on SGLang's Triton kernel ----------------------------
    def decode(self, *args, **kwargs) -> torch.Tensor:
        raise NotImplementedError(
            "qla-serve runs GDN extend only; decode must stay on SGLang's Triton kernel "
            "(the qla dispatcher hook routes it there)")

    def target_verify(self, *args, **kwargs) -> torch.Tensor:
        raise NotImplementedError(
            "qla-serve runs GDN extend only; target_verify must stay on SGLang's Triton kernel")

    # -- extend ---------------------------------------------------------------------------------
    def _plan_for(self, query_start_loc: torch.Tensor) -> PrefillPlan:
        n = query_start_loc.shape[0] - 1
        host = self.host_seqlens
        if host is not None and len(host) == n:
            cu = [0]
            for length in host:
                cu.append(cu[-1] + int(length))
            key = (tuple(cu), query_start_loc.device)
            if key != self._plan_key:
                self._plan = plan_prefill(cu, device=query_start_loc.device)
                self._plan_key = key
            return self._plan
        # No host lengths for this call (the forward_extend hook is not in the path): read the
        # boundaries back. One small device->host copy per layer, like FLA's chunk-index setup.
        self._plan_key = None
        return plan_prefill(query_start_loc.cpu(), device=query_start_loc.device)

    def extend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        g: torch.Tensor,
        beta: torch.Tensor,
        *,
        ssm_states: torch.Tensor,
        cache_indices: torch.Tensor,
        query_start_loc: torch.Tensor,
        output: torch.Tensor | None = None,
        inplace_update: bool = True,
        track_state: torch.Tensor | None = None,
        track_chunk_idx: torch.Tensor | None = None,
        num_state_checkpoints: int = 0,
        **kwargs,
    ) -> tuple:
        if not inplace_update:
            raise NotImplementedError(
                "qla-serve GDN extend always writes final states to the pool; SGLang asked for "
                "inplace_update=False (multi-item scoring): use --linear-attn-prefill-backend triton")
        if num_state_checkpoints:
            raise NotImplementedError(
                "qla-serve GDN extend does not take FlashInfer-style state checkpoint plans")
        if (track_state is None) != (track_chunk_idx is None):
            raise ValueError("track_state and track_chunk_idx must be passed together")

        batched = q.dim() == 4
        T = q.shape[1] if batched else q.shape[0]
        HV, Vd = v.shape[-2], v.shape[-1]
        if not self._preload_asked:
            # At the first extend (SGLang's start-up warm-up request): load every kernel this
            # adapter can hit, so no later request pays a first load (preload acts once a process).
            self._preload_asked = True
            why = preload(v.device, q.shape[-2], HV, ssm_states.dtype, engine="sglang", log=logger.info)
            if why is not None:
                logger.info("qla-serve: no kernels preloaded (%s)", why)
        plan = self._plan_for(query_start_loc)
        n_tok = plan.total_tokens
        if n_tok > T:
            raise ValueError(f"query_start_loc ends at {n_tok} but only {T} tokens were given")

        def tokens(x: torch.Tensor, dims: int) -> torch.Tensor:
            """Drop SGLang's leading 1 and any trailing tokens past the last sequence."""
            x = x[0] if x.dim() == dims + 1 else x
            return x[:n_tok] if n_tok < x.shape[0] else x

        if (output is not None and tuple(output.shape) == (1, T, HV, Vd) and output.dtype == v.dtype
                and output.device == v.device and output[0].is_contiguous()):
            out_full = output
        else:
            out_full = torch.empty(1, T, HV, Vd, dtype=v.dtype, device=v.device)
        if n_tok < T:  # trailing tokens outside every sequence (padding): zero output
            out_full[0, n_tok:].zero_()

        checkpoints = None
        if track_state is not None and plan.num_chunks:
            checkpoints = torch.empty(1, plan.num_chunks, *ssm_states.shape[1:],
                                      dtype=torch.float32, device=ssm_states.device)
        gdn_prefill(
            tokens(q, 3), tokens(k, 3), tokens(v, 3), tokens(g, 2), tokens(beta, 2),
            state_pool=ssm_states, state_indices=cache_indices,
            cu_seqlens=plan.cu_seqlens, plan=plan, use_qk_l2norm=True,
            out=out_full[0, :n_tok], checkpoints=checkpoints, state_layout="vk",
        )
        if track_state is not None:
            self._fill_track_state(track_state, track_chunk_idx, checkpoints, plan)
        return (out_full if batched else out_full[0]), None, None

    @staticmethod
    def _fill_track_state(track_state: torch.Tensor, track_chunk_idx: torch.Tensor,
                          checkpoints: torch.Tensor | None, plan: PrefillPlan) -> None:
        """track_state[i] = state before chunk ``track_chunk_idx[i]`` of sequence i (rows with a
        negative index are left as they are). Index plumbing only, no device->host sync."""
        if checkpoints is None:
            return
        idx = track_chunk_idx.to(torch.long)
        live = idx >= 0
        flat = (plan.chunk_offsets[:-1].to(torch.long) + idx.clamp(min=0)).clamp(max=plan.num_chunks - 1)
        picked = checkpoints[0].index_select(0, flat).to(track_state.dtype)
        track_state.copy_(torch.where(live.view(-1, 1, 1, 1), picked, track_state))
