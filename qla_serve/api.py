"""The op contract: GDN prefill and decode on an engine's paged recurrent-state pool, in place, and
the inputs an adapter may hand the prefill: the causal conv on the engine's conv-state pool with
q/k normalised (``gdn_conv``) and the gates (``gdn_gating``).

Every check here runs before any backend touches memory, so a rejected call leaves the pool
bit-identical. With a plan, validation reads only tensor metadata (shape, dtype, device, strides):
no device→host sync.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import torch

from . import dispatch
from .plan import PrefillPlan, check_slot_indices, plan_prefill

STATE_LAYOUTS = ("vk", "kv")
ACTIVATION_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
POOL_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
INDEX_DTYPES = (torch.int32, torch.int64)


def _tensor(name: str, x: Any) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def _drop_unit_batch(name: str, x: torch.Tensor, dims: int) -> torch.Tensor:
    """Accept ``[1, T, ...]`` as well as ``[T, ...]`` (FLA and SGLang pass a leading 1)."""
    if x.dim() == dims + 1:
        if x.shape[0] != 1:
            raise ValueError(f"{name}: a leading batch dim must be 1 for varlen input, got {tuple(x.shape)}")
        return x[0]
    if x.dim() != dims:
        raise ValueError(f"{name} must be {dims}-D (or {dims + 1}-D with a leading 1), got shape {tuple(x.shape)}")
    return x


def _same_device(device: torch.device, first: str = "q", **tensors: torch.Tensor | None) -> None:
    for name, t in tensors.items():
        if t is not None and t.device != device:
            raise ValueError(f"{name} is on {t.device} but {first} is on {device}")


def _check_dtype(name: str, x: torch.Tensor, allowed: tuple[torch.dtype, ...]) -> None:
    if x.dtype not in allowed:
        names = ", ".join(str(d).removeprefix("torch.") for d in allowed)
        raise TypeError(f"{name} dtype must be one of {names}, got {x.dtype}")


class GateInputs(NamedTuple):
    """GDN's raw gate inputs, for :func:`gdn_prefill` to compute ``g`` and ``beta`` itself (the
    formula of :func:`gdn_gating`) instead of taking them: a ``[T, HV]`` (or ``[1, T, HV]``) each,
    A_log and dt_bias ``[HV]``; bf16/fp16/fp32. On the Hopper path this costs no launch of its own
    (the gates ride in the q/k l2norm pass), so an adapter saves an op call per layer."""

    a: torch.Tensor
    b: torch.Tensor
    A_log: torch.Tensor
    dt_bias: torch.Tensor
    softplus_threshold: float = 20.0


def _check_gate_inputs(a, b, A_log, dt_bias, prefix: str = "") -> tuple[torch.Tensor, torch.Tensor]:
    """Types, dtypes, shapes and devices of raw gate inputs; returns ``(a, b)`` as ``[T, HV]``.
    ``prefix`` goes before every name in messages ("gates." for gdn_prefill's)."""
    p = prefix
    for name, x in (("a", a), ("b", b), ("A_log", A_log), ("dt_bias", dt_bias)):
        _tensor(p + name, x)
        _check_dtype(p + name, x, ACTIVATION_DTYPES)
    a, b = (_drop_unit_batch(p + n, x, 2) for n, x in (("a", a), ("b", b)))
    if a.shape != b.shape:
        raise ValueError(f"{p}b shape {tuple(b.shape)} must equal {p}a shape {tuple(a.shape)}")
    HV = a.shape[1]
    for name, x in (("A_log", A_log), ("dt_bias", dt_bias)):
        if tuple(x.shape) != (HV,):
            raise ValueError(f"{p}{name} must have shape [{HV}] ({p}a's heads), got {tuple(x.shape)}")
    _same_device(a.device, p + "a", **{p + "b": b, p + "A_log": A_log, p + "dt_bias": dt_bias})
    return a, b


def _check_qkv(q, k, v, g, beta, n_tokens_dim: str):
    if q.shape != k.shape:
        raise ValueError(f"k shape {tuple(k.shape)} must equal q shape {tuple(q.shape)}")
    T, H, Kd = q.shape
    if v.shape[0] != T:
        raise ValueError(f"v has {v.shape[0]} {n_tokens_dim} but q has {T}")
    HV, Vd = v.shape[1], v.shape[2]
    if H == 0 or HV % H != 0:
        raise ValueError(f"v heads ({HV}) must be a multiple of q/k heads ({H}) (GVA)")
    _check_dtype("q", q, ACTIVATION_DTYPES)
    for name, x in (("k", k), ("v", v)):
        if x.dtype != q.dtype:
            raise TypeError(f"{name} dtype {x.dtype} must equal q dtype {q.dtype}")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.stride(-1) != 1:
            raise ValueError(f"{name} must have a contiguous last dim (stride(-1) == 1), got strides {x.stride()}")
    for name, x in (("g", g), ("beta", beta)):
        if x is None:       # gdn_prefill(gates=...): the op fills its own
            continue
        if tuple(x.shape) != (T, HV):
            raise ValueError(f"{name} must have shape [{n_tokens_dim}, HV] = {(T, HV)}, got {tuple(x.shape)}")
        if not x.dtype.is_floating_point:
            raise TypeError(f"{name} must be floating point (fp32 preferred), got {x.dtype}")
    return T, H, Kd, HV, Vd


def _check_pool(state_pool: torch.Tensor, state_layout: str, HV: int, Kd: int, Vd: int) -> None:
    if state_layout not in STATE_LAYOUTS:
        raise ValueError(f"state_layout must be one of {STATE_LAYOUTS}, got {state_layout!r}")
    inner = (HV, Vd, Kd) if state_layout == "vk" else (HV, Kd, Vd)
    if state_pool.dim() != 4 or tuple(state_pool.shape[1:]) != inner:
        want = "[slots, HV, V, K]" if state_layout == "vk" else "[slots, HV, K, V]"
        raise ValueError(f"state_pool must be {want} = [slots, {', '.join(map(str, inner))}] for "
                         f"state_layout={state_layout!r}, got shape {tuple(state_pool.shape)}")
    _check_dtype("state_pool", state_pool, POOL_DTYPES)
    want_strides = (inner[1] * inner[2], inner[2], 1)
    if tuple(state_pool.stride()[1:]) != want_strides:
        raise ValueError(f"state_pool rows must be contiguous (strides [*, {', '.join(map(str, want_strides))}]; "
                         f"any stride(0) is fine), got strides {state_pool.stride()}")


def _check_indices(name: str, x: torch.Tensor, n: int) -> None:
    if x.dim() != 1 or x.shape[0] != n:
        raise ValueError(f"{name} must have shape [{n}] (one per sequence), got {tuple(x.shape)}")
    _check_dtype(name, x, INDEX_DTYPES)


def _check_out(out: torch.Tensor | None, shape: tuple[int, ...], like: torch.Tensor) -> None:
    if out is None:
        return
    _tensor("out", out)
    if tuple(out.shape) != shape and tuple(out.shape) != (1, *shape):
        raise ValueError(f"out must have shape {shape}, got {tuple(out.shape)}")
    if out.dtype != like.dtype:
        raise TypeError(f"out dtype {out.dtype} must equal v dtype {like.dtype}")
    if out.device != like.device:
        raise ValueError(f"out is on {out.device} but q is on {like.device}")


def _check_batch(cu_seqlens: torch.Tensor, state_indices: torch.Tensor, has_initial_state: torch.Tensor | None,
                 null_slot: int | None, plan: PrefillPlan | None, num_slots: int, dev: torch.device,
                 T: int, first: str) -> PrefillPlan:
    """The batch's sequence metadata against each other and the plan (built here when missing,
    which reads the boundaries and indices back to the host: a sync on GPU). ``first``: the name of
    the tensor whose device ``dev`` is, for messages. Returns the plan."""
    if cu_seqlens.dim() != 1 or cu_seqlens.shape[0] < 2:
        raise ValueError(f"cu_seqlens must be 1-D with N+1 ≥ 2 entries, got shape {tuple(cu_seqlens.shape)}")
    _check_dtype("cu_seqlens", cu_seqlens, INDEX_DTYPES)
    N = cu_seqlens.shape[0] - 1
    _check_indices("state_indices", state_indices, N)
    if has_initial_state is not None:
        if has_initial_state.dim() != 1 or has_initial_state.shape[0] != N:
            raise ValueError(f"has_initial_state must have shape [{N}], got {tuple(has_initial_state.shape)}")
        if has_initial_state.dtype != torch.bool:
            raise TypeError(f"has_initial_state must be bool, got {has_initial_state.dtype}")
    if null_slot is not None and not isinstance(null_slot, int):
        raise TypeError(f"null_slot must be an int or None, got {type(null_slot).__name__}")

    if plan is None:
        # No plan: build one here. This reads device metadata back to the host (a sync on GPU).
        plan = plan_prefill(cu_seqlens.cpu(), device=dev, state_indices_cpu=state_indices.cpu(),
                            num_slots=num_slots, null_slot=null_slot)
    else:
        if plan.num_seqs != N:
            raise ValueError(f"plan describes {plan.num_seqs} sequences but cu_seqlens describes {N}")
        if plan.device != dev:
            raise ValueError(f"plan was built for {plan.device} but {first} is on {dev}")
        if not plan.checked_indices and state_indices.device.type == "cpu":
            # Host-resident indices cost nothing to check; device ones are checked only by the plan.
            check_slot_indices(state_indices.tolist(), num_slots, null_slot)
    if plan.total_tokens != T:
        raise ValueError(f"cu_seqlens[-1] = {plan.total_tokens} must equal the number of tokens T = {T}")
    return plan


# An engine calls gdn_prefill once per GDN layer with tensors of the same forms every step; only the
# token and sequence counts change. A call whose form (everything validation reads, the counts
# aside: _prefill_form) passed the full validation before re-checks only its counts (_counts_fit);
# a count that does not fit takes the full validation, which raises the named error. Host time is
# what a serving step's first GDN layer makes the GPU wait for (session 16); on the CPU machine,
# kernels stubbed, this halved the op's Python (137 → 72 µs a call at 16/32 heads).
_VALIDATED_FORMS: set[tuple] = set()
_VALIDATED_FORMS_MAX = 1024


def _token_form(t: torch.Tensor) -> tuple:
    return (t.dtype, t.device, t.shape[1:], t.stride())


def _seq_form(t: torch.Tensor | None) -> tuple | None:
    return None if t is None else (t.dtype, t.device, t.dim(), t.stride())


def _prefill_form(q, k, v, g, beta, gates, state_pool, state_indices, cu_seqlens, has_initial_state, out, plan,
                  checkpoints, scale, use_qk_l2norm, state_layout, null_slot) -> tuple | None:
    """The key of a call of the plain form the fast path takes (3-D q/k/v and 2-D gates without a
    leading 1, a plan, no checkpoints), or None. Anything that is not a tensor where one belongs
    also gives None: the full validation names it."""
    if type(plan) is not PrefillPlan or checkpoints is not None:
        return None
    try:
        if q.dim() != 3 or (out is not None and out.dim() != 3):
            return None
        if gates is None:
            if g.dim() != 2 or beta.dim() != 2:
                return None
            gate_form = (_token_form(g), _token_form(beta))
        else:
            if (type(gates) is not GateInputs or g is not None or beta is not None or gates.a.dim() != 2
                    or gates.b.dim() != 2):
                return None
            gate_form = (_token_form(gates.a), _token_form(gates.b), gates.A_log.dtype, gates.A_log.device,
                         gates.A_log.shape, gates.dt_bias.dtype, gates.dt_bias.device, gates.dt_bias.shape,
                         float(gates.softplus_threshold))
        return (_token_form(q), _token_form(k), _token_form(v), gate_form,
                (state_pool.dtype, state_pool.device, state_pool.shape, state_pool.stride()),
                _seq_form(state_indices), _seq_form(cu_seqlens), _seq_form(has_initial_state),
                None if out is None else _token_form(out), scale, bool(use_qk_l2norm), state_layout,
                type(null_slot), null_slot)
    except (AttributeError, TypeError, ValueError):
        return None


def _counts_fit(q, k, v, g, beta, gates, state_indices, cu_seqlens, has_initial_state, out, plan) -> bool:
    """The count checks of the full validation for a call whose form passed it: every token tensor
    has T rows, every sequence tensor N (= the plan's), the plan's tokens and device agree, and
    slot indices on the host were checked by the plan."""
    T, N = q.shape[0], plan.num_seqs
    rows = (k, v, g, beta) if gates is None else (k, v, gates.a, gates.b)
    return (all(x.shape[0] == T for x in rows) and (out is None or out.shape[0] == T)
            and plan.total_tokens == T and N >= 1 and cu_seqlens.shape[0] == N + 1
            and state_indices.shape[0] == N and (has_initial_state is None or has_initial_state.shape[0] == N)
            and plan.device == q.device and (plan.checked_indices or state_indices.device.type != "cpu"))


def gdn_prefill(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor | None = None,
    beta: torch.Tensor | None = None, *,
    state_pool: torch.Tensor, state_indices: torch.Tensor, cu_seqlens: torch.Tensor,
    has_initial_state: torch.Tensor | None = None, plan: PrefillPlan | None = None,
    scale: float | None = None, use_qk_l2norm: bool = False, out: torch.Tensor | None = None,
    checkpoints: torch.Tensor | None = None, state_layout: str = "vk", null_slot: int | None = None,
    gates: GateInputs | None = None,
) -> torch.Tensor:
    """Chunked GDN prefill for a varlen batch, states read from and written to ``state_pool`` in place.

    Args:
        q, k: ``[T, H, K]`` (or ``[1, T, H, K]``), bf16/fp16/fp32; may be strided views with a
            contiguous last dim (e.g. slices of one packed qkv buffer).
        v: ``[T, HV, V]``; value head i uses key head ``i // (HV // H)``.
        g: ``[T, HV]`` log-space decay (≤ 0), fp32. beta: ``[T, HV]`` in [0, 1], fp32.
            Both, or neither with ``gates``.
        state_pool: ``[slots, HV, V, K]`` (``state_layout="vk"``, vLLM and SGLang) or
            ``[slots, HV, K, V]`` ("kv"); fp32/bf16/fp16; any ``stride(0)``.
        state_indices: ``[N]`` int32/int64 pool row per sequence. A negative index or
            ``null_slot`` skips the sequence: no read, no write, zero output.
        cu_seqlens: ``[N+1]`` int32/int64 token offsets, on q's device.
        has_initial_state: ``[N]`` bool; False starts from zero instead of reading the row.
            None means every live sequence reads its row.
        plan: from :func:`plan_prefill` on host metadata. Without one the call builds it, which
            reads ``cu_seqlens`` and ``state_indices`` back to the host (a sync on GPU).
        scale: defaults to ``K ** -0.5``. use_qk_l2norm: l2-normalise q and k inside the op.
        out: optional ``[T, HV, V]`` output buffer (v's dtype).
        checkpoints: optional ``[1, num_chunks, HV, *state]`` buffer receiving the state before
            each 64-token chunk (FLA's ``h``), in the pool's layout.
        gates: :class:`GateInputs` instead of ``g`` and ``beta``: the op computes them
            (:func:`gdn_gating`'s formula) as part of the call.

    Returns:
        ``out``: ``[T, HV, V]`` (``[1, T, HV, V]`` when q had a leading 1).
    """
    form = _prefill_form(q, k, v, g, beta, gates, state_pool, state_indices, cu_seqlens, has_initial_state, out,
                         plan, checkpoints, scale, use_qk_l2norm, state_layout, null_slot)
    if form in _VALIDATED_FORMS and _counts_fit(q, k, v, g, beta, gates, state_indices, cu_seqlens,
                                                has_initial_state, out, plan):
        T, _, Kd = q.shape
        HV, Vd = v.shape[1], v.shape[2]
        dev = q.device
        if gates is not None:
            gates = gates._replace(softplus_threshold=float(gates.softplus_threshold))
        return _run_prefill(q, k, v, g, beta, gates, state_pool, state_indices, has_initial_state, plan, scale,
                            use_qk_l2norm, out, None, state_layout, null_slot, T, HV, Kd, Vd, dev, form)
    if gates is None:
        if g is None or beta is None:
            raise ValueError("gdn_prefill needs g and beta, or gates=GateInputs(a, b, A_log, dt_bias)")
        gate_tensors = (("g", g), ("beta", beta))
    else:
        if not isinstance(gates, GateInputs):
            raise TypeError(f"gates must be a qla_serve.GateInputs, got {type(gates).__name__}")
        if g is not None or beta is not None:
            raise ValueError("pass g and beta, or gates, not both")
        gate_tensors = ()
    for name, x in (("q", q), ("k", k), ("v", v), *gate_tensors, ("state_pool", state_pool),
                    ("state_indices", state_indices), ("cu_seqlens", cu_seqlens)):
        _tensor(name, x)
    if has_initial_state is not None:
        _tensor("has_initial_state", has_initial_state)
    if plan is not None and not isinstance(plan, PrefillPlan):
        raise TypeError(f"plan must be a PrefillPlan from qla_serve.plan_prefill, got {type(plan).__name__}")
    batched = q.dim() == 4
    q, k, v = (_drop_unit_batch(n, x, 3) for n, x in (("q", q), ("k", k), ("v", v)))
    if gates is None:
        g, beta = (_drop_unit_batch(n, x, 2) for n, x in (("g", g), ("beta", beta)))
    T, H, Kd, HV, Vd = _check_qkv(q, k, v, g, beta, "T")
    dev = q.device
    if gates is not None:
        a, b = _check_gate_inputs(*gates[:4], prefix="gates.")
        if tuple(a.shape) != (T, HV):
            raise ValueError(f"gates.a and gates.b must have shape [T, HV] = {(T, HV)}, got {tuple(a.shape)}")
        thr = gates.softplus_threshold
        if not isinstance(thr, (int, float)) or isinstance(thr, bool):
            raise TypeError(f"gates.softplus_threshold must be a number, got {type(thr).__name__}")
        gates = gates._replace(a=a, b=b, softplus_threshold=float(thr))
    _same_device(dev, k=k, v=v, g=g, beta=beta, state_pool=state_pool, state_indices=state_indices,
                 cu_seqlens=cu_seqlens, has_initial_state=has_initial_state, out=out, checkpoints=checkpoints,
                 **{"gates.a": gates.a} if gates is not None else {})
    _check_pool(state_pool, state_layout, HV, Kd, Vd)
    plan = _check_batch(cu_seqlens, state_indices, has_initial_state, null_slot, plan, state_pool.shape[0], dev, T,
                        "q")
    _check_out(out, (T, HV, Vd), v)
    if checkpoints is not None:
        _tensor("checkpoints", checkpoints)
        state_dims = tuple(state_pool.shape[1:])
        if tuple(checkpoints.shape) != (1, plan.num_chunks, *state_dims):
            raise ValueError(f"checkpoints must have shape {(1, plan.num_chunks, *state_dims)}, "
                             f"got {tuple(checkpoints.shape)}")
    if form is not None and len(_VALIDATED_FORMS) < _VALIDATED_FORMS_MAX:
        _VALIDATED_FORMS.add(form)
    result = _run_prefill(q, k, v, g, beta, gates, state_pool, state_indices, has_initial_state, plan, scale,
                          use_qk_l2norm, out, checkpoints, state_layout, null_slot, T, HV, Kd, Vd, dev, form)
    if batched and result.dim() == 3:
        result = result.unsqueeze(0)
    return result


def _run_prefill(q, k, v, g, beta, gates, state_pool, state_indices, has_initial_state, plan, scale, use_qk_l2norm,
                 out, checkpoints, state_layout, null_slot, T, HV, Kd, Vd, dev, form) -> torch.Tensor:
    """gdn_prefill after validation: the buffers the call needs, then the backend. ``form``: the
    call's form key (None off the fast path's forms), which backends may key their own per-form
    work on."""
    if scale is None:
        scale = Kd ** -0.5
    out3 = torch.empty(T, HV, Vd, dtype=v.dtype, device=dev) if out is None else (out[0] if out.dim() == 4 else out)
    if gates is not None:   # the backend fills these from the gate inputs first
        g = torch.empty(T, HV, dtype=torch.float32, device=dev)
        beta = torch.empty(T, HV, dtype=torch.float32, device=dev)
    call = dict(q=q, k=k, v=v, g=g if g.dtype == torch.float32 else g.float(),
                beta=beta if beta.dtype == torch.float32 else beta.float(),
                state_pool=state_pool, state_indices=state_indices, has_initial_state=has_initial_state,
                plan=plan, scale=float(scale), use_qk_l2norm=bool(use_qk_l2norm), out=out3,
                state_layout=state_layout, null_slot=null_slot, checkpoints=checkpoints, gates=gates, form=form)
    if plan.num_seqs:
        dispatch.run("prefill", call)
    return out if out is not None else out3


def gdn_decode(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, *,
    state_pool: torch.Tensor, state_indices: torch.Tensor, scale: float | None = None,
    use_qk_l2norm: bool = False, out: torch.Tensor | None = None, state_layout: str = "vk",
    null_slot: int | None = None, state_indices_cpu: torch.Tensor | None = None,
) -> torch.Tensor:
    """One token per sequence, state updated in place: q, k ``[N, H, K]``; v ``[N, HV, V]``;
    g, beta ``[N, HV]``. ``[N, 1, ...]`` inputs (FLA's decode shape) are accepted too.

    Slot ranges and duplicates are checked when the indices are on the CPU or a host copy is given
    as ``state_indices_cpu``; otherwise the call reads nothing back from the device.
    """
    for name, x in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta), ("state_pool", state_pool),
                    ("state_indices", state_indices)):
        _tensor(name, x)
    one_token_dim = q.dim() == 4
    if one_token_dim:
        for name, x in (("q", q), ("k", k), ("v", v)):
            if x.dim() != 4 or x.shape[1] != 1:
                raise ValueError(f"{name} must be [N, 1, heads, dim] for decode, got {tuple(x.shape)}")
        q, k, v = q[:, 0], k[:, 0], v[:, 0]
        g, beta = (x[:, 0] if x.dim() == 3 else x for x in (g, beta))
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.dim() != 3:
            raise ValueError(f"{name} must be [N, heads, dim] for decode, got {tuple(x.shape)}")
    N, H, Kd, HV, Vd = _check_qkv(q, k, v, g, beta, "N")
    dev = q.device
    _same_device(dev, k=k, v=v, g=g, beta=beta, state_pool=state_pool, state_indices=state_indices, out=out)
    _check_pool(state_pool, state_layout, HV, Kd, Vd)
    _check_indices("state_indices", state_indices, N)
    host_idx = state_indices_cpu if state_indices_cpu is not None else (
        state_indices if state_indices.device.type == "cpu" else None)
    if host_idx is not None:
        check_slot_indices(host_idx.tolist(), state_pool.shape[0], null_slot)
    _check_out(out, (N, HV, Vd), v)
    if scale is None:
        scale = Kd ** -0.5
    out3 = torch.empty(N, HV, Vd, dtype=v.dtype, device=dev) if out is None else out.reshape(N, HV, Vd)
    call = dict(q=q, k=k, v=v, g=g, beta=beta, state_pool=state_pool, state_indices=state_indices,
                scale=float(scale), use_qk_l2norm=bool(use_qk_l2norm), out=out3,
                state_layout=state_layout, null_slot=null_slot)
    if N:
        dispatch.run("decode", call)
    result = out if out is not None else out3
    return result.unsqueeze(1) if one_token_dim and result.dim() == 3 else result


def gdn_gating(a: torch.Tensor, b: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor, *,
               softplus_threshold: float = 20.0) -> tuple[torch.Tensor, torch.Tensor]:
    """GDN's gates from an engine's raw inputs, as :func:`gdn_prefill` takes them:
    ``g = −exp(A_log) · softplus(a + dt_bias)`` and ``beta = sigmoid(b)`` (vLLM's and FLA's formula;
    softplus(x) = x above ``softplus_threshold``).

    Args:
        a, b: ``[T, HV]`` (or ``[1, T, HV]``), bf16/fp16/fp32, contiguous last dim.
        A_log, dt_bias: ``[HV]``, any float dtype.

    Returns:
        ``(g, beta)``: ``[T, HV]`` fp32 each.
    """
    a, b = _check_gate_inputs(a, b, A_log, dt_bias)
    g = torch.empty(a.shape, dtype=torch.float32, device=a.device)
    beta = torch.empty(a.shape, dtype=torch.float32, device=a.device)
    if a.shape[0]:
        dispatch.run("gating", dict(a=a, b=b, A_log=A_log, dt_bias=dt_bias, g=g, beta=beta,
                                    threshold=float(softplus_threshold)))
    return g, beta


CONV_STATE_LAYOUTS = ("sd", "ds")
CONV_ACTIVATIONS = ("silu", None)


def gdn_conv(
    x: torch.Tensor, *, weight: torch.Tensor, bias: torch.Tensor | None = None, conv_state: torch.Tensor,
    state_indices: torch.Tensor, cu_seqlens: torch.Tensor, num_k_heads: int, head_k_dim: int = 128,
    head_v_dim: int = 128, has_initial_state: torch.Tensor | None = None, plan: PrefillPlan | None = None,
    conv_state_layout: str = "sd", activation: str | None = "silu", l2norm_qk: bool = True,
    null_slot: int | None = None, out: torch.Tensor | None = None,
) -> torch.Tensor:
    """GDN's short causal conv over a prefill batch of packed ``[q | k | v]`` projections, reading each
    sequence's conv state from ``conv_state`` and writing its new one back in place, with q and k
    l2-normalised per head on the way out (what :func:`gdn_prefill` then takes with
    ``use_qk_l2norm=False``).

    Args:
        x: ``[T, 2·H·K + HV·V]`` (or ``[1, T, ...]``): the projections, q heads, then k, then v; a
            strided token dim is fine (contiguous channels).
        weight: ``[C, W]`` or ``[C, 1, W]`` (a depthwise ``Conv1d`` weight), C = x's channels;
            w[:, W−1] multiplies the current token. bias: ``[C]`` or None.
        conv_state: ``[slots, W−1, C]`` (``conv_state_layout="sd"``, vLLM's default) or
            ``[slots, C, W−1]`` ("ds"); any ``stride(0)``. Row s holds the input W−1−s tokens back.
        state_indices, cu_seqlens, has_initial_state, plan, null_slot: as for :func:`gdn_prefill`.
            A sequence whose slot is negative or ``null_slot`` is convolved from a zero state and
            its row is not written.
        num_k_heads, head_k_dim, head_v_dim: split the channels into q/k/v heads (HV follows).
        activation: ``"silu"`` or None. l2norm_qk: normalise the q and k heads.
        out: optional ``[T, C]`` output (x's dtype).

    Returns:
        ``[T, C]`` (``[1, T, C]`` when x had a leading 1), the packed layout of ``x``.
    """
    for name, t in (("x", x), ("weight", weight), ("conv_state", conv_state), ("state_indices", state_indices),
                    ("cu_seqlens", cu_seqlens)):
        _tensor(name, t)
    for name, t in (("bias", bias), ("has_initial_state", has_initial_state), ("out", out)):
        if t is not None:
            _tensor(name, t)
    if plan is not None and not isinstance(plan, PrefillPlan):
        raise TypeError(f"plan must be a PrefillPlan from qla_serve.plan_prefill, got {type(plan).__name__}")
    batched = x.dim() == 3
    x = _drop_unit_batch("x", x, 2)
    _check_dtype("x", x, ACTIVATION_DTYPES)
    if x.stride(-1) != 1:
        raise ValueError(f"x must have contiguous channels (stride(-1) == 1), got strides {x.stride()}")
    T, C = x.shape
    for name, val in (("num_k_heads", num_k_heads), ("head_k_dim", head_k_dim), ("head_v_dim", head_v_dim)):
        if not isinstance(val, int) or isinstance(val, bool) or val <= 0:
            raise ValueError(f"{name} must be a positive int, got {val!r}")
    rest = C - 2 * num_k_heads * head_k_dim
    if rest <= 0 or rest % head_v_dim:
        raise ValueError(f"x has {C} channels: not 2·num_k_heads·head_k_dim = {2 * num_k_heads * head_k_dim} "
                         f"plus a positive multiple of head_v_dim = {head_v_dim}")
    if weight.dim() == 3 and weight.shape[1] == 1:
        weight = weight[:, 0]
    if weight.dim() != 2 or weight.shape[0] != C or weight.shape[1] < 2:
        raise ValueError(f"weight must be [C, W] or [C, 1, W] with C = {C} and W ≥ 2, got {tuple(weight.shape)}")
    _check_dtype("weight", weight, ACTIVATION_DTYPES)
    W = weight.shape[1]
    if bias is not None:
        _check_dtype("bias", bias, ACTIVATION_DTYPES)
        if tuple(bias.shape) != (C,):
            raise ValueError(f"bias must have shape [{C}], got {tuple(bias.shape)}")
    if conv_state_layout not in CONV_STATE_LAYOUTS:
        raise ValueError(f"conv_state_layout must be one of {CONV_STATE_LAYOUTS}, got {conv_state_layout!r}")
    inner = (W - 1, C) if conv_state_layout == "sd" else (C, W - 1)
    if conv_state.dim() != 3 or tuple(conv_state.shape[1:]) != inner:
        want = "[slots, W−1, C]" if conv_state_layout == "sd" else "[slots, C, W−1]"
        raise ValueError(f"conv_state must be {want} = [slots, {inner[0]}, {inner[1]}] for conv_state_layout="
                         f"{conv_state_layout!r}, got shape {tuple(conv_state.shape)}")
    _check_dtype("conv_state", conv_state, POOL_DTYPES)
    if tuple(conv_state.stride()[1:]) != (inner[1], 1):
        raise ValueError(f"conv_state rows must be contiguous (strides [*, {inner[1]}, 1]; any stride(0)), "
                         f"got strides {conv_state.stride()}")
    if activation not in CONV_ACTIVATIONS:
        raise ValueError(f"activation must be one of {CONV_ACTIVATIONS}, got {activation!r}")
    dev = x.device
    _same_device(dev, "x", weight=weight, bias=bias, conv_state=conv_state, state_indices=state_indices,
                 cu_seqlens=cu_seqlens, has_initial_state=has_initial_state, out=out)
    plan = _check_batch(cu_seqlens, state_indices, has_initial_state, null_slot, plan, conv_state.shape[0], dev, T,
                        "x")
    N = plan.num_seqs
    _check_out(out, (T, C), x)
    out2 = torch.empty(T, C, dtype=x.dtype, device=dev) if out is None else (out[0] if out.dim() == 3 else out)
    if N and T:
        dispatch.run("conv", dict(x=x, weight=weight, bias=bias, conv_state=conv_state,
                                  conv_state_layout=conv_state_layout, state_indices=state_indices,
                                  has_initial_state=has_initial_state, plan=plan, out=out2,
                                  qk_channels=2 * num_k_heads * head_k_dim, head_k_dim=head_k_dim,
                                  l2norm_qk=bool(l2norm_qk), activation=activation, null_slot=null_slot))
    result = out if out is not None else out2
    if batched and result.dim() == 2:
        result = result.unsqueeze(0)
    return result
