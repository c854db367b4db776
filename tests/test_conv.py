"""qla_serve.gdn_conv: the causal conv on the engine's conv-state pool, q/k l2-normalised.

Every backend is checked against a sliding-window oracle written here in fp64 (one token at a time:
the window is the state rows, then each new token; the new state is the window's last W − 1 rows),
on fresh random inputs: lengths 1, 2, 3 (shorter than the state), 64, 65, 130 (across chunks), with
and without initial states, null and negative slots, both state layouts, bf16 and fp32 states, a
strided pool, a strided x, bias or not. Outputs are poisoned first; pool rows of skipped slots must
stay bit-identical. The reference runs on CPU; the TileLang kernel on an sm_90 GPU (``-m gpu``).
"""
from __future__ import annotations

import pytest
import torch

from conftest import case_seed
import qla_serve
from qla_serve import dispatch, plan_prefill

K = V = 128
W = 4


def conv_oracle(x, weight, bias, rows, seqlens, live, init, qk_channels, l2norm_qk=True):
    """fp64, token by token. ``rows[n]``: sequence n's state rows [W−1, C] ("sd" orientation).
    Returns (out [T, C], new rows per sequence)."""
    x, w = x.double().cpu(), weight.reshape(weight.shape[0], -1).double().cpu()
    out, new_rows, t0 = [], [], 0
    for n, L in enumerate(seqlens):
        window = rows[n].double().cpu().clone() if (live[n] and init[n]) else torch.zeros(W - 1, x.shape[1],
                                                                                         dtype=torch.float64)
        for t in range(t0, t0 + L):
            full = torch.cat([window, x[t:t + 1]])                        # [W, C], oldest first
            y = (w.T * full).sum(0) + (0 if bias is None else bias.double().cpu())
            out.append(y * torch.sigmoid(y))
            window = full[1:]
        new_rows.append(window)
        t0 += L
    y = torch.stack(out)
    if l2norm_qk:
        qk = y[:, :qk_channels].unflatten(1, (-1, K))
        qk = qk / torch.sqrt((qk * qk).sum(-1, keepdim=True) + 1e-6)
        y = torch.cat([qk.flatten(1), y[:, qk_channels:]], 1)
    return y, new_rows


def make_conv_case(seqlens, H, HV, *, seed, device="cpu", layout="sd", state_dtype=torch.bfloat16, bias=False,
                   x_pad=0, pool_pad=8, null_slot=0):
    """Random projections (optionally a column view of a wider buffer), a strided conv-state pool
    with every 4th sequence on the null slot and one on a negative slot, initial states mixed."""
    gen = torch.Generator().manual_seed(seed)
    N, T = len(seqlens), sum(seqlens)
    C = 2 * H * K + HV * V
    xbuf = torch.randn(T, C + x_pad, generator=gen).bfloat16().to(device)
    x = xbuf[:, :C]
    weight = (0.5 * torch.randn(C, 1, W, generator=gen)).bfloat16().to(device)
    b = (0.5 * torch.randn(C, generator=gen)).bfloat16().to(device) if bias else None
    slots = N + 3
    inner = (W - 1, C) if layout == "sd" else (C, W - 1)
    base = torch.randn(slots, inner[0] * inner[1] + pool_pad, generator=gen).to(state_dtype).to(device)
    state = base[:, :inner[0] * inner[1]].view(slots, *inner)
    idx = [n + 2 for n in range(N)]
    for n in range(0, N, 4):
        idx[n] = null_slot
    if N > 2:
        idx[2] = -1
    hinit = [bool(n % 3 != 1) for n in range(N)]
    cu = [0]
    for L in seqlens:
        cu.append(cu[-1] + L)
    return dict(x=x, weight=weight, bias=b, conv_state=state, idx=idx, hinit=hinit, cu=cu, seqlens=seqlens,
                layout=layout, H=H, HV=HV, null_slot=null_slot)


def run_and_check(case, device, *, expect_backend, l2norm_qk=True, tol=None):
    x, state, layout = case["x"], case["conv_state"], case["layout"]
    N = len(case["seqlens"])
    sd_rows = state if layout == "sd" else state.transpose(1, 2)
    before = state.clone()
    live = [s >= 0 and s != case["null_slot"] for s in case["idx"]]
    rows = [sd_rows[s] if live[n] else None for n, s in enumerate(case["idx"])]
    ref, new_rows = conv_oracle(x, case["weight"], case["bias"], rows, case["seqlens"], live, case["hinit"],
                                2 * case["H"] * K, l2norm_qk)
    out = torch.full(x.shape, float("nan"), dtype=x.dtype, device=device)
    cu = torch.tensor(case["cu"], dtype=torch.int32)
    idx = torch.tensor(case["idx"], dtype=torch.int32)
    plan = plan_prefill(cu, device=device, state_indices_cpu=idx, num_slots=state.shape[0],
                        null_slot=case["null_slot"])
    calls = dispatch.calls[("conv", expect_backend)]
    got = qla_serve.gdn_conv(x, weight=case["weight"], bias=case["bias"], conv_state=state,
                             state_indices=idx.to(device), cu_seqlens=plan.cu_seqlens, num_k_heads=case["H"],
                             has_initial_state=torch.tensor(case["hinit"], device=device), plan=plan,
                             conv_state_layout=layout, l2norm_qk=l2norm_qk, null_slot=case["null_slot"], out=out)
    assert got is out and dispatch.calls[("conv", expect_backend)] == calls + 1
    assert torch.isfinite(out.float()).all(), "an output element was not written"
    err = float((out.double().cpu() - ref).norm() / ref.norm())
    assert err < (tol or 4e-3), err                     # bf16 output rounding: ~2e-3
    for n, s in enumerate(case["idx"]):
        if live[n]:
            want = new_rows[n].to(state.dtype)
            now = sd_rows[s].cpu()
            assert torch.equal(now, want.cpu()), (n, (now.double() - want.double()).abs().max())
    touched = {s for n, s in enumerate(case["idx"]) if live[n]}
    for s in range(state.shape[0]):
        if s not in touched:
            assert torch.equal(state[s], before[s]), f"slot {s} changed"
    return err


CASES = [
    # tag, seqlens, H, HV, kw
    ("short-and-long", [1, 2, 3, 5, 64, 65, 130], 1, 2, {}),
    ("ds-fp32-bias", [3, 70, 1, 2, 129], 1, 2, dict(layout="ds", state_dtype=torch.float32, bias=True)),
    ("strided-x", [64, 1, 200, 7], 2, 4, dict(x_pad=256 + 8)),
    ("one-token", [1], 1, 2, {}),
]


@pytest.mark.parametrize("tag,seqlens,H,HV,kw", CASES, ids=[c[0] for c in CASES])
def test_reference_matches_the_sliding_window(tag, seqlens, H, HV, kw):
    case = make_conv_case(seqlens, H, HV, seed=case_seed(tag), **kw)
    run_and_check(case, "cpu", expect_backend="reference")


def test_reference_without_l2norm():
    case = make_conv_case([5, 66], 1, 2, seed=3)
    run_and_check(case, "cpu", expect_backend="reference", l2norm_qk=False)


def test_bad_conv_input_is_named_and_state_untouched():
    case = make_conv_case([5, 66], 1, 2, seed=4)
    state = case["conv_state"]
    before = state.clone()
    cu = torch.tensor(case["cu"], dtype=torch.int32)
    idx = torch.tensor(case["idx"], dtype=torch.int32)
    good = dict(weight=case["weight"], conv_state=state, state_indices=idx, cu_seqlens=cu, num_k_heads=1)

    def call(**over):
        args = {**good, **over}
        x = args.pop("x", case["x"])
        return qla_serve.gdn_conv(x, **args)

    for over, exc, match in [
        (dict(x=case["x"].float().to(torch.int32)), TypeError, "x dtype"),
        (dict(num_k_heads=3), ValueError, "x has 512 channels"),
        (dict(num_k_heads=0), ValueError, "num_k_heads"),
        (dict(weight=case["weight"][:, :, :1]), ValueError, "weight must be"),
        (dict(bias=torch.zeros(7, dtype=torch.bfloat16)), ValueError, "bias must have shape"),
        (dict(conv_state=state.transpose(1, 2)), ValueError, "conv_state must be"),
        (dict(conv_state_layout="xy"), ValueError, "conv_state_layout"),
        (dict(activation="gelu"), ValueError, "activation"),
        (dict(state_indices=idx[:1]), ValueError, "state_indices must have shape"),
        (dict(state_indices=torch.tensor([2, 99], dtype=torch.int32)), ValueError, "out of range"),
        (dict(cu_seqlens=torch.tensor([0, 5, 70], dtype=torch.int32)), ValueError, "must equal the number of tokens"),
        (dict(has_initial_state=torch.ones(2)), TypeError, "has_initial_state must be bool"),
        (dict(out=torch.empty(3, 512, dtype=torch.bfloat16)), ValueError, "out must have shape"),
    ]:
        with pytest.raises(exc, match=match):
            call(**over)
        assert torch.equal(state, before)


# ---------------------------------------------------------------------------------------------- GPU
cuda_ok = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
try:
    import tilelang  # noqa: F401
    have_tilelang = True
except Exception:
    have_tilelang = False
GPU_CASES = CASES + [
    ("serving-mix", [1] * 16 + [4096, 700], 16, 32, {}),
    ("gva8-long", [8192, 3], 2, 16, dict(state_dtype=torch.float32)),
]


@pytest.mark.parametrize("tag,seqlens,H,HV,kw", GPU_CASES, ids=[c[0] for c in GPU_CASES])
@pytest.mark.gpu
@pytest.mark.skipif(not (cuda_ok and have_tilelang), reason="needs an sm_90 GPU and tilelang")
def test_conv_kernel_matches_the_sliding_window(tag, seqlens, H, HV, kw):
    case = make_conv_case(seqlens, H, HV, seed=case_seed(tag), device="cuda:0", **kw)
    err = run_and_check(case, "cuda:0", expect_backend="tilelang")
    print(f"conv {tag}: rel err {err:.2e}")


@pytest.mark.gpu
@pytest.mark.skipif(not (cuda_ok and have_tilelang), reason="needs an sm_90 GPU and tilelang")
def test_conv_kernel_agrees_with_vllm_conv_and_the_pass():
    """Where vLLM is installed: the kernel's output and conv state against vLLM's causal conv
    followed by the l2norm of q/k (the path it replaces in the vLLM adapter)."""
    vllm_conv = pytest.importorskip("vllm.model_executor.layers.mamba.ops.causal_conv1d")
    from qla_serve.reference import l2norm

    H, HV, seqlens = 16, 32, [1] * 8 + [3000, 64, 2]
    case = make_conv_case(seqlens, H, HV, seed=11, device="cuda:0", null_slot=0)
    x, w, state = case["x"], case["weight"], case["conv_state"]
    N, C = len(seqlens), x.shape[1]
    cu = torch.tensor(case["cu"], dtype=torch.int32, device="cuda:0")
    idx = torch.tensor(case["idx"], dtype=torch.int32)
    idx[2] = 1                                   # vLLM's kernel knows the null block, not negative slots
    hinit = torch.tensor(case["hinit"], device="cuda:0")
    theirs_state = state.clone()
    theirs = vllm_conv.causal_conv1d_fn(x.transpose(0, 1), w[:, 0], None, activation="silu",
                                        conv_states=theirs_state.transpose(1, 2), has_initial_state=hinit,
                                        cache_indices=idx.cuda(), query_start_loc=cu).transpose(0, 1).float()
    qk = theirs[:, :2 * H * K].unflatten(1, (2 * H, K))
    theirs = torch.cat([l2norm(qk.bfloat16().float()).flatten(1), theirs[:, 2 * H * K:]], 1)
    mine = qla_serve.gdn_conv(x, weight=w, conv_state=state, state_indices=idx.cuda(), cu_seqlens=cu,
                              num_k_heads=H, has_initial_state=hinit, null_slot=0)
    live = torch.tensor([s != 0 for s in idx.tolist()])
    tok_live = torch.repeat_interleave(live, torch.tensor(seqlens)).cuda()
    err = float((mine.float()[tok_live] - theirs[tok_live]).norm() / theirs[tok_live].norm())
    assert err < 4e-3, err
    assert torch.equal(state[idx[live]], theirs_state[idx[live]])
    print(f"conv vs vLLM conv + l2norm: rel diff {err:.2e}")


@pytest.mark.gpu
@pytest.mark.skipif(not (cuda_ok and have_tilelang), reason="needs an sm_90 GPU and tilelang")
def test_vllm_warmup_covers_the_conv_path():
    """What vLLM's warm-up builds with QLA_VLLM_CONV=qla is all the adapter's gdn_conv path runs:
    gdn_conv, then gdn_prefill on views of its output without l2norm. No compile after."""
    from qla_serve import gdn_prefill, warmup
    from qla_serve.kernels import hopper

    H, HV = 2, 4
    axes = warmup.ENGINE_AXES["vllm-qla-conv"]
    variants = hopper.variants_for_heads(H, HV, pool_dtypes=("float32",), **axes)
    hopper.warmup(variants, log=None)
    warmup._side_kernels(hopper, "vllm-qla-conv", [(H, HV)], variants)
    before = hopper.compile_count
    for lens in ([70, 5, 300], [1]):
        case = make_conv_case(lens, H, HV, seed=len(lens), device="cuda:0")
        cu = torch.tensor(case["cu"], dtype=torch.int32)
        idx = torch.tensor(case["idx"], dtype=torch.int32, device="cuda:0")
        hinit = torch.tensor(case["hinit"], device="cuda:0")
        plan = plan_prefill(cu, device="cuda:0")
        out = qla_serve.gdn_conv(case["x"].contiguous(), weight=case["weight"], conv_state=case["conv_state"],
                                 state_indices=idx, cu_seqlens=plan.cu_seqlens, plan=plan, num_k_heads=H,
                                 has_initial_state=hinit, null_slot=0)
        T = out.shape[0]
        q = out[:, :H * K].unflatten(1, (H, K))
        k = out[:, H * K:2 * H * K].unflatten(1, (H, K))
        v = out[:, 2 * H * K:].unflatten(1, (HV, V))
        pool = torch.randn(len(lens) + 3, HV, V, K, device="cuda:0")
        g = -torch.rand(T, HV, device="cuda:0")
        beta = torch.rand(T, HV, device="cuda:0")
        gdn_prefill(q, k, v, g, beta, state_pool=pool, state_indices=idx, cu_seqlens=plan.cu_seqlens,
                    has_initial_state=hinit, plan=plan, null_slot=0)
    torch.cuda.synchronize()
    assert hopper.compile_count == before
