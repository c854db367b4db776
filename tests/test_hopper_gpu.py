"""Hopper TileLang prefill vs the fp64 token oracle (needs an sm_90 GPU and tilelang; skipped otherwise).

Fresh random inputs per case; outputs poisoned with NaN first; pool rows of skipped slots must stay
bit-identical. Errors are relative L2 (‖x − ref‖ / ‖ref‖) over live sequences; each case prints
its figures (pytest -s) and appends them to $QLA_ERR_LOG when set.
"""
import json
import os

import pytest
import torch

from conftest import case_seed
import qla_serve
from qla_serve import plan_prefill
from qla_serve.reference import kv_to_pool, l2norm, pool_to_kv, token_recurrence

pytestmark = pytest.mark.gpu

cuda_ok = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
try:
    import tilelang  # noqa: F401
    have_tilelang = True
except Exception:
    have_tilelang = False
skip = pytest.mark.skipif(not (cuda_ok and have_tilelang), reason="needs an sm_90 GPU and tilelang")

DEV = "cuda:0"
K = V = 128


@pytest.fixture(autouse=True)
def tilelang_only(monkeypatch):
    """Every call here must run the Hopper kernels: a call they refused would otherwise fall back to
    the reference and pass against the oracle without testing them. Aβ's buffer is NaN-filled
    before each call: kkt_solve writes only its blocks on and below the diagonal, and a walk reading
    any other element of a real row would put NaN into the output."""
    monkeypatch.setenv("QLA_BACKEND", "tilelang")
    monkeypatch.setenv("QLA_ABETA_POISON", "1")


def rel(x, ref):
    x, ref = x.double().cpu(), ref.double().cpu()
    return float((x - ref).norm() / ref.norm().clamp_min(1e-30))


def make_case(seqlens, H, HV, *, gmax, seed, packed=False, extra=0, l2_in_kernel=False, pool_dtype=torch.float32,
              layout="vk", strided_pool=True, null_slot=0, skip_every=4, hinit_mode="mix", correlated=False):
    gen = torch.Generator().manual_seed(seed)
    N, T = len(seqlens), sum(seqlens)
    dt = torch.bfloat16
    if packed:
        width = 2 * H * K + HV * V + extra      # extra = 7: an odd token stride (no TMA, no 16-byte loads)
        mixed = torch.randn(T, width, generator=gen).to(dt).to(DEV)
        q = mixed[:, :H * K].view(T, H, K)
        k = mixed[:, H * K:2 * H * K].view(T, H, K)
        v = mixed[:, 2 * H * K:2 * H * K + HV * V].view(T, HV, V)
    else:
        q = torch.randn(T, H, K, generator=gen).to(dt).to(DEV)
        k = torch.randn(T, H, K, generator=gen).to(dt).to(DEV)
        v = torch.randn(T, HV, V, generator=gen).to(dt).to(DEV)
    if correlated:      # the keys of a head share one direction, as neighbouring tokens' keys do
        u = torch.randn(1, H, K, generator=gen)
        k.copy_(l2norm(u + 0.3 * torch.randn(T, H, K, generator=gen)).to(dt))
    if not l2_in_kernel:
        q.copy_(l2norm(q.float()).to(dt))
        k.copy_(l2norm(k.float()).to(dt))
    g = (-gmax * torch.rand(T, HV, generator=gen)).to(DEV)
    g[torch.rand(T, HV, generator=gen) < 0.05] = 0.0
    beta = torch.rand(T, HV, generator=gen).to(DEV)
    slots = N + 3
    shape = (slots, HV, V, K) if layout == "vk" else (slots, HV, K, V)
    if strided_pool == "misaligned":
        # base address one element past a 16-byte boundary: TMA cannot read it (pool_takes_tma), so
        # a persistent walk asked for runs one CTA per item
        n = slots * HV * V * K
        pool = torch.randn(n + 1, generator=gen).to(pool_dtype).to(DEV)[1:].view(shape)
    elif strided_pool:
        base = torch.randn(slots, 2, *shape[1:], generator=gen).to(pool_dtype).to(DEV)
        pool = base[:, 0]
    else:
        pool = torch.randn(*shape, generator=gen).to(pool_dtype).to(DEV)
    perm = (torch.randperm(slots - 1, generator=gen)[:N] + 1).tolist()   # slot 0 is the null slot
    idx = []
    for i in range(N):
        if skip_every and i % skip_every == skip_every - 1:
            idx.append(-1 if i % 2 else null_slot)
        else:
            idx.append(perm[i])
    if hinit_mode == "mix":
        hinit = torch.tensor([i % 3 != 1 for i in range(N)], dtype=torch.bool)
    elif hinit_mode == "none":
        hinit = None
    else:
        hinit = torch.ones(N, dtype=torch.bool)
    return dict(q=q, k=k, v=v, g=g, beta=beta, pool=pool, idx=idx, hinit=hinit, seqlens=seqlens,
                layout=layout, null_slot=null_slot, l2=l2_in_kernel,
                idx_dev=torch.tensor(idx, dtype=torch.int32, device=DEV),
                hinit_dev=hinit.to(DEV) if hinit is not None else None)


def oracle(case, pool_before):
    seqlens, N = case["seqlens"], len(case["seqlens"])
    cu = [0]
    for n in seqlens:
        cu.append(cu[-1] + n)
    s0 = pool_to_kv(pool_before[[max(s, 0) for s in case["idx"]]].double(), case["layout"])
    if case["hinit"] is not None:
        s0[~case["hinit"]] = 0
    # fp64 on the GPU: the same token recurrence; on the CPU it was most of these tests' time
    o, finals = token_recurrence(case["q"], case["k"], case["v"], case["g"], case["beta"], cu, s0,
                                 use_qk_l2norm=case["l2"], device=DEV)
    return (o.cpu(), finals.cpu()), cu


def case_plan(case):
    """The case's plan: its lengths, its slot indices checked against its pool on the host."""
    cu = torch.tensor([0] + list(torch.tensor(case["seqlens"]).cumsum(0).tolist()), dtype=torch.int32)
    return plan_prefill(cu, device=DEV, state_indices_cpu=torch.tensor(case["idx"]),
                        num_slots=case["pool"].shape[0], null_slot=case["null_slot"])


def run_qla(case, block_v=None, plan=None, out=None, walk=None, kkt_heads=None):
    """walk: {"persistent": bool, "ctas": n} forces the walk's form and CTA count (with block_v);
    kkt_heads: kkt_solve's value heads per CTA (default: the plan's pick)."""
    if plan is None:
        plan = case_plan(case)
    if block_v is not None:
        plan.kernel_data[("hopper", case["v"].shape[1], V)] = {"block_v": block_v, **(walk or {})}
    T, HV = case["v"].shape[0], case["v"].shape[1]
    if kkt_heads is not None:
        plan.kernel_data[("hopper-kkt", case["k"].shape[1], HV)] = kkt_heads
    if out is None:
        out = torch.full((T, HV, V), float("nan"), dtype=case["v"].dtype, device=DEV)
    idx, hinit = case["idx_dev"], case["hinit_dev"]
    qla_serve.gdn_prefill(case["q"], case["k"], case["v"], case["g"], case["beta"], state_pool=case["pool"],
                          state_indices=idx, cu_seqlens=plan.cu_seqlens, has_initial_state=hinit, plan=plan,
                          use_qk_l2norm=case["l2"], out=out, state_layout=case["layout"],
                          null_slot=case["null_slot"])
    return out


def check(case, out, pool_before, tag, o_tol=5e-3, s_tol=5e-3, ref=None):
    """``ref``: :func:`oracle`'s answer for this case when the caller already has it."""
    (o_ref, s_ref), cu = ref or oracle(case, pool_before)
    assert not torch.isnan(out).any(), f"{tag}: unwritten (NaN) outputs"
    live = [i for i, s in enumerate(case["idx"]) if s >= 0 and s != case["null_slot"]]
    dead = [i for i in range(len(case["idx"])) if i not in live]
    for i in dead:
        assert (out[cu[i]:cu[i + 1]] == 0).all(), f"{tag}: skipped sequence {i} has non-zero output"
    rows = torch.cat([torch.arange(cu[i], cu[i + 1]) for i in live]) if live else torch.arange(0)
    e_o = rel(out.cpu()[rows], o_ref[rows])
    final = pool_to_kv(case["pool"][[case["idx"][i] for i in live]].double(), case["layout"])
    e_s = rel(final, s_ref[live])
    touched = {case["idx"][i] for i in live}
    for s in range(case["pool"].shape[0]):
        if s not in touched:
            assert torch.equal(case["pool"][s], pool_before[s].to(DEV)), f"{tag}: pool row {s} changed"
    msg = dict(case=tag, o_err=e_o, state_err=e_s, tokens=int(sum(case["seqlens"])))
    print(json.dumps(msg))
    if os.environ.get("QLA_ERR_LOG"):
        with open(os.environ["QLA_ERR_LOG"], "a") as f:
            f.write(json.dumps(msg) + "\n")
    assert e_o < o_tol, f"{tag}: o error {e_o:.3e}"
    assert e_s < s_tol, f"{tag}: state error {e_s:.3e}"
    return e_o, e_s


def capture_then_replay(case, plan, out, seqlens, seeds, tag, **make_kw):
    """Capture one call in a CUDA graph, then per seed: copy fresh inputs of the same shapes into the
    captured tensors, poison out, replay, check against the oracle."""
    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.cuda.graph(graph, stream=s):
        run_qla(case, plan=plan, out=out)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    H, HV = case["q"].shape[1], case["v"].shape[1]
    for seed in seeds:
        new = make_case(seqlens, H, HV, seed=seed, **make_kw)
        for name in ("q", "k", "v", "g", "beta", "idx_dev"):
            case[name].copy_(new[name])
        case["pool"].copy_(new["pool"])
        case["idx"] = new["idx"]
        out.fill_(float("nan"))
        pool_before = case["pool"].cpu().clone()
        graph.replay()
        torch.cuda.synchronize()
        check(case, out, pool_before, f"{tag}-{seed}")


SHORT = [1, 63, 64, 65, 130, 1, 200, 777, 2, 1024, 3, 64]
CASES = [
    # tag, seqlens, H, HV, kwargs, block_v
    ("gva1-fp32-vk-g30-bv128", SHORT, 1, 1, dict(gmax=30.0, packed=True, extra=7), 128),
    ("gva2-bf16-kv-g3-bv64", SHORT, 2, 4, dict(gmax=3.0, pool_dtype=torch.bfloat16, layout="kv"), 64),
    ("gva4-fp32-kv-l2-g0.1-bv128", SHORT[:8], 2, 8, dict(gmax=0.1, layout="kv", l2_in_kernel=True,
                                                           packed=True), 128),
    ("gva8-bf16-vk-noinit-g1-bv64", SHORT[:8], 1, 8, dict(gmax=1.0, pool_dtype=torch.bfloat16,
                                                            hinit_mode="none", strided_pool=False), 64),
    ("gva2-fp32-vk-32k-g0.3", [32768, 5, 300], 1, 2, dict(gmax=0.3, skip_every=0, hinit_mode="all",
                                                           packed=True), None),
    ("gva2-fp32-vk-single-tokens", [1] * 40 + [257], 1, 2, dict(gmax=10.0), None),
    ("gva2-fp32-vk-under-one-chunk", [37, 1, 5], 1, 2, dict(gmax=3.0), None),   # T < 64: no whole chunk
    ("gva2-fp32-vk-g3-bv64", SHORT, 2, 4, dict(gmax=3.0), 64),
    ("gva4-bf16-kv-l2-bv64", SHORT[:8], 2, 8, dict(gmax=1.0, pool_dtype=torch.bfloat16, layout="kv",
                                                     l2_in_kernel=True, packed=True), 64),
    # 4800 items (sequence, head, V-block) at V-block 64: every persistent CTA walks ~36 of them
    ("gva4-fp32-vk-300-seqs-bv64", [1 + (37 * i) % 300 for i in range(300)], 2, 8, dict(gmax=2.0), 64),
    # l2norm pass on an odd token stride (element loads) and on a 1-token batch (compact copies)
    ("gva2-bf16-vk-l2-odd-stride", SHORT, 2, 4, dict(gmax=3.0, pool_dtype=torch.bfloat16, l2_in_kernel=True,
                                                      packed=True, extra=7), None),
    ("gva2-fp32-vk-l2-one-token", [1], 2, 4, dict(gmax=3.0, l2_in_kernel=True, packed=True, skip_every=0), None),
    # GVA 3 (16/48's ratio; odd, so never split over CTAs): kkt_solve's g and β rows padded to
    # whole rounds of its threads
    ("gva3-fp32-kv-g3", SHORT, 2, 6, dict(gmax=3.0, layout="kv"), None),
]


@skip
@pytest.mark.parametrize("tag,seqlens,H,HV,kw,block_v", CASES, ids=[c[0] for c in CASES])
def test_matches_oracle(tag, seqlens, H, HV, kw, block_v):
    case = make_case(seqlens, H, HV, seed=case_seed(tag), **kw)
    pool_before = case["pool"].cpu().clone()
    out = run_qla(case, block_v=block_v)
    torch.cuda.synchronize()
    bf16_pool = case["pool"].dtype == torch.bfloat16
    check(case, out, pool_before, tag, s_tol=8e-3 if bf16_pool else 5e-3)


def errors_of_fla_form(gdn, case, pool_before, ref):
    """o and final-state errors against the fp64 oracle (``ref``, :func:`oracle`'s answer) of
    ``gdn``, a function with FLA 0.6's ``chunk_gated_delta_rule`` signature, on the case's inputs
    and start states (every sequence live and with a start state: ``skip_every=0,
    hinit_mode="all"``, a "vk" pool)."""
    (o_ref, s_ref), cu = ref
    idx = torch.tensor(case["idx"])
    h0 = pool_before[idx].to(DEV, torch.float32)                         # [N, HV, V, K]
    cu = torch.tensor(cu, device=DEV)
    o, ht = gdn(*(case[n].unsqueeze(0) for n in ("q", "k", "v", "g", "beta")), initial_state=h0,
                output_final_state=True, state_v_first=True, cu_seqlens=cu)
    return rel(o.reshape(o_ref.shape), o_ref), rel(pool_to_kv(ht.double(), "vk"), s_ref)


CORRELATED = [
    # tag, seqlens, H, HV, gmax: slow decay, where Aβ's precision shows in o most
    ("corr-gva2-g0.02", [1000, 257, 64, 1], 2, 4, 0.02),
    ("corr-gva4-g0.1", [2048, 300, 65], 2, 8, 0.1),
]


@skip
@pytest.mark.parametrize("tag,seqlens,H,HV,gmax", CORRELATED, ids=[c[0] for c in CORRELATED])
def test_correlated_keys_no_worse_than_fla(tag, seqlens, H, HV, gmax):
    """Issue 3: errors against the fp64 oracle no worse than FLA's on the same inputs, here with
    correlated keys: the other cases' keys are independent, and there Aβ's precision does not show
    in o at all (session 35's emulation, h200-session35/exp/kkt_scheme_xhi.py: with correlated keys
    and slow decay a kkt_solve that rounds X in its merges adds 6-10 % to the error of o that Aβ
    causes)."""
    fla = pytest.importorskip("fla.ops.gated_delta_rule")
    case = make_case(seqlens, H, HV, gmax=gmax, seed=case_seed(tag), correlated=True, skip_every=0,
                     hinit_mode="all")
    pool_before = case["pool"].cpu().clone()
    out = run_qla(case)
    torch.cuda.synchronize()
    # the bound that counts here is FLA's; the absolute one only catches garbage (the other cases'
    # 5e-3 is for independent keys: with correlated ones, Aβ's bf16 rounding alone is ~3e-3 of o)
    ref = oracle(case, pool_before)                  # the fp64 recurrence once, for both
    e_o, e_s = check(case, out, pool_before, tag, o_tol=2e-2, s_tol=2e-2, ref=ref)
    f_o, f_s = errors_of_fla_form(fla.chunk_gated_delta_rule, case, pool_before, ref)
    print(json.dumps(dict(case=tag + "-fla", o_err=f_o, state_err=f_s)))
    assert e_o <= 1.05 * f_o, f"{tag}: o error {e_o:.3e} against FLA's {f_o:.3e}"
    assert e_s <= 1.05 * f_s, f"{tag}: state error {e_s:.3e} against FLA's {f_s:.3e}"


def with_kw(case, **kw):
    """A CASES entry with make_case keywords added or replaced."""
    return case[:4] + ({**case[4], **kw},) + case[5:]


WALK_FORMS = [
    # tag, CASES entry, walk form: few persistent CTAs (odd counts: partial last rounds, both
    # directions of the deal) or one CTA per item
    ("gva1-fp32-vk-g30-bv128-5ctas", CASES[0], dict(persistent=True, ctas=5)),
    ("gva2-bf16-kv-g3-bv64-7ctas", CASES[1], dict(persistent=True, ctas=7)),
    ("gva4-bf16-kv-l2-bv64-3ctas", CASES[8], dict(persistent=True, ctas=3)),
    ("gva2-fp32-vk-g3-bv64-cta-per-item", CASES[7], dict(persistent=False, ctas=1)),
    ("gva4-fp32-kv-l2-g0.1-bv128-cta-per-item", CASES[2], dict(persistent=False, ctas=1)),
    ("gva2-fp32-vk-misaligned-pool-5ctas", with_kw(CASES[7], strided_pool="misaligned"),
     dict(persistent=True, ctas=5)),
    # bf16 pools one element (2 bytes) off a 16-byte boundary, both layouts, in the walk such a pool
    # runs (one CTA per item)
    ("gva2-bf16-kv-misaligned-pool-cta-per-item", with_kw(CASES[1], strided_pool="misaligned"),
     dict(persistent=False, ctas=1)),
    ("gva2-bf16-vk-misaligned-pool-5ctas", with_kw(CASES[7], strided_pool="misaligned", pool_dtype=torch.bfloat16),
     dict(persistent=True, ctas=5)),
]


@skip
@pytest.mark.parametrize("tag,base,walk", WALK_FORMS, ids=[c[0] for c in WALK_FORMS])
def test_walk_forms_match_oracle(tag, base, walk):
    _, seqlens, H, HV, kw, block_v = base
    case = make_case(seqlens, H, HV, seed=case_seed(tag), **kw)
    pool_before = case["pool"].cpu().clone()
    out = run_qla(case, block_v=block_v, walk=walk)
    torch.cuda.synchronize()
    bf16_pool = case["pool"].dtype == torch.bfloat16
    check(case, out, pool_before, tag, s_tol=8e-3 if bf16_pool else 5e-3)


# GVA 2, 4 (l2norm pass, packed rows), 8, and 4 with 300 sequences (a grid the plan leaves unsplit)
KKT_SPLITS = [CASES[1], CASES[2], CASES[3], CASES[9]]


@skip
@pytest.mark.parametrize("tag,seqlens,H,HV,kw,block_v", KKT_SPLITS, ids=[c[0] + "-kkt-forms" for c in KKT_SPLITS])
def test_kkt_split_forms_agree_bit_for_bit(tag, seqlens, H, HV, kw, block_v):
    """kkt_solve with a key head's value heads split over 2, 4, … CTAs does each value head's math
    unchanged (only the CTA doing it moves): outputs and final states are bit-identical in every
    form the plan can pick, and match the oracle."""
    from qla_serve.kernels import hopper

    case = make_case(seqlens, H, HV, seed=case_seed(tag + "-kkt-forms"), **kw)
    pool_before = case["pool"].clone()
    forms = hopper.kkt_split_forms(H, HV)
    assert forms[0] == HV // H and forms[-1] == 1 and len(forms) > 1
    got = {}
    for heads in forms:
        case["pool"].copy_(pool_before)
        out = run_qla(case, block_v=block_v, kkt_heads=heads)
        torch.cuda.synchronize()
        got[heads] = (out.clone(), case["pool"].clone())
    for heads in forms[1:]:
        assert torch.equal(got[heads][0], got[forms[0]][0]), f"{tag}: outputs differ at {heads} heads per CTA"
        assert torch.equal(got[heads][1], got[forms[0]][1]), f"{tag}: states differ at {heads} heads per CTA"
    bf16_pool = case["pool"].dtype == torch.bfloat16
    check(case, got[forms[-1]][0], pool_before.cpu(), tag + "-kkt-forms", s_tol=8e-3 if bf16_pool else 5e-3)


@skip
@pytest.mark.parametrize("seqlens", [[128, 64, 192, 77], [4096 + 37]], ids=["4-seqs", "one-seq"])
def test_kkt_without_its_table_read_matches_the_table_path(seqlens):
    """Batches whose chunk c starts at token 64·c (every sequence but the last a whole number of
    chunks; the last one partial): kkt_solve skips its chunk_bounds read there (the plan's
    chunks_at_64c). Outputs and final states are bit-identical to the table path's, and match the oracle."""
    from qla_serve.kernels import hopper

    tag = f"chunks-at-64c-{len(seqlens)}"
    case = make_case(seqlens, 2, 4, seed=case_seed(tag), gmax=3.0)
    pool_before = case["pool"].clone()
    got = {}
    for at64 in (1, 0):
        case["pool"].copy_(pool_before)
        plan = case_plan(case)
        assert hopper.chunks_at_64c(plan) == 1
        plan.kernel_data["hopper-chunks-at-64c"] = at64      # 0: the table path, as unaligned batches run
        out = run_qla(case, plan=plan)
        torch.cuda.synchronize()
        got[at64] = (out.clone(), case["pool"].clone())
    assert torch.equal(got[1][0], got[0][0]), f"{tag}: outputs differ from the table path's"
    assert torch.equal(got[1][1], got[0][1]), f"{tag}: states differ from the table path's"
    check(case, got[1][0], pool_before.cpu(), tag)


L2_FORMS = [c for c in CASES if c[4].get("l2_in_kernel")]


@skip
@pytest.mark.parametrize("T_,strided", [(1, False), (300, False), (300, True)])
def test_gating_kernel_matches_reference(T_, strided):
    """qla_serve.gdn_gating on the GPU (TileLang) against the same formula in fp64, on a/b as
    contiguous tensors and as column views of one [T, 2·HV] buffer (vLLM's in_proj_ba form)."""
    from qla_serve import dispatch, gdn_gating

    gen = torch.Generator().manual_seed(T_ + strided)
    HV = 32
    if strided:
        ba = (4 * torch.randn(T_, 2 * HV, generator=gen)).bfloat16().to(DEV)
        b, a = ba[:, :HV], ba[:, HV:]
    else:
        a = (4 * torch.randn(T_, HV, generator=gen)).bfloat16().to(DEV)
        b = (4 * torch.randn(T_, HV, generator=gen)).bfloat16().to(DEV)
    a[0, 0] = 30.0
    A_log = torch.randn(HV, generator=gen).to(DEV)
    dt_bias = torch.randn(HV, generator=gen).bfloat16().to(DEV)
    before = dispatch.calls[("gating", "tilelang")]
    g, beta = gdn_gating(a, b, A_log, dt_bias)
    assert dispatch.calls[("gating", "tilelang")] == before + 1
    x = a.double() + dt_bias.double()
    g_ref = -torch.exp(A_log.double()) * torch.where(x > 20, x, torch.log1p(torch.exp(x)))
    assert torch.allclose(g.double(), g_ref, rtol=1e-5, atol=1e-6), (g.double() - g_ref).abs().max()
    assert torch.allclose(beta.double(), torch.sigmoid(b.double()), rtol=1e-5, atol=1e-6)


@skip
@pytest.mark.parametrize("tag,seqlens,H,HV,kw,block_v", L2_FORMS, ids=[c[0] + "-in-kernel" for c in L2_FORMS])
def test_l2norm_inside_the_kernels_matches_oracle(tag, seqlens, H, HV, kw, block_v, monkeypatch):
    """QLA_L2NORM=kernel (the A/B aid): kkt_solve and the walk normalise q/k themselves."""
    from qla_serve.kernels import hopper

    monkeypatch.setenv(hopper.L2NORM_ENV, "kernel")
    case = make_case(seqlens, H, HV, seed=case_seed(tag + "-in-kernel"), **kw)
    pool_before = case["pool"].cpu().clone()
    out = run_qla(case, block_v=block_v)
    torch.cuda.synchronize()
    bf16_pool = case["pool"].dtype == torch.bfloat16
    check(case, out, pool_before, tag + "-in-kernel", s_tol=8e-3 if bf16_pool else 5e-3)


GATE_FORMS = [
    # tag, seqlens, H, HV, make_case kwargs: the l2norm pass computes the gates (packed views, as
    # vLLM's adapter; a 1-token batch: compact copies), or, without l2norm, the gating kernel does
    ("gates-in-l2-pass-2/8-bf16-kv", SHORT[:8], 2, 8, dict(gmax=1.0, pool_dtype=torch.bfloat16, layout="kv",
                                                           l2_in_kernel=True, packed=True)),
    ("gates-in-l2-pass-one-token", [1], 2, 8, dict(gmax=1.0, l2_in_kernel=True, packed=True, skip_every=0)),
    ("gates-no-l2-2/4-fp32-vk", SHORT, 2, 4, dict(gmax=1.0, packed=True)),
]


@skip
@pytest.mark.parametrize("tag,seqlens,H,HV,kw", GATE_FORMS, ids=[c[0] for c in GATE_FORMS])
def test_gate_inputs_match_oracle(tag, seqlens, H, HV, kw):
    """gdn_prefill(gates=GateInputs(a, b, A_log, dt_bias)): g and β computed inside the call (in the
    l2norm pass when there is one, no gdn_gating op call), against the fp64 oracle run on the fp64
    gates of the same inputs."""
    from qla_serve import GateInputs, dispatch
    from qla_serve.kernels import hopper

    case = make_case(seqlens, H, HV, seed=case_seed(tag), **kw)
    gen = torch.Generator().manual_seed(case_seed(tag) + 1)
    T = sum(seqlens)
    a = (3 * torch.randn(T, HV, generator=gen)).bfloat16().to(DEV)
    b = (2 * torch.randn(T, HV, generator=gen)).bfloat16().to(DEV)
    A_log = (torch.rand(HV, generator=gen) * 2 - 1).to(DEV)
    dt_bias = torch.randn(HV, generator=gen).bfloat16().to(DEV)
    x = a.double() + dt_bias.double()
    case["g"] = -torch.exp(A_log.double()) * torch.where(x > 20, x, torch.log1p(torch.exp(x)))
    case["beta"] = torch.sigmoid(b.double())
    pool_before = case["pool"].cpu().clone()
    plan = case_plan(case)
    out = torch.full((T, HV, V), float("nan"), dtype=torch.bfloat16, device=DEV)
    gating_calls = dispatch.calls[("gating", "tilelang")]
    qla_serve.gdn_prefill(case["q"], case["k"], case["v"], gates=GateInputs(a, b, A_log, dt_bias),
                          state_pool=case["pool"], state_indices=case["idx_dev"], cu_seqlens=plan.cu_seqlens,
                          has_initial_state=case["hinit_dev"], plan=plan, use_qk_l2norm=case["l2"], out=out,
                          state_layout=case["layout"], null_slot=case["null_slot"])
    torch.cuda.synchronize()
    assert dispatch.calls[("gating", "tilelang")] == gating_calls       # no gdn_gating op call
    fused = [key for key in hopper._kernels if key[0] == "qk_norm" and key[-1] is not None and key[-1][0] == HV]
    assert bool(fused) == case["l2"]
    bf16_pool = case["pool"].dtype == torch.bfloat16
    check(case, out, pool_before, tag, s_tol=8e-3 if bf16_pool else 5e-3)


@skip
def test_cuda_graph_replay():
    seqlens = [100, 64, 1, 513]
    case = make_case(seqlens, 2, 4, gmax=2.0, seed=7, packed=False)
    plan = case_plan(case)
    out = torch.full((678, 4, V), float("nan"), dtype=torch.bfloat16, device=DEV)
    run_qla(case, plan=plan, out=out)           # compile + warm outside the capture
    torch.cuda.synchronize()
    capture_then_replay(case, plan, out, seqlens, (11, 12), "cuda-graph-replay", gmax=2.0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_plans_share_device_tables_per_stream():
    """Plans of one batch shape share one device copy of their tables per CUDA stream
    (StagedInt32.shared_to); a plan made on another stream gets that stream's own copy; a plan made
    during a graph capture keeps none (its copy is only filled when the graph replays)."""
    from qla_serve.plan import _current_raw_stream, _current_stream_public, clear_host_caches

    clear_host_caches()
    cu = [0, 100, 300, 301]
    dev = torch.cuda.current_device()
    assert _current_raw_stream(dev) == _current_stream_public(dev)
    a, b = plan_prefill(cu, device=DEV), plan_prefill(cu, device=DEV)
    want = [[0, 100, 0, 0], [64, 100, 0, 0], [100, 300, 100, 1], [164, 300, 100, 1], [228, 300, 100, 1],
            [292, 300, 100, 1], [300, 301, 300, 2]]
    assert a.chunk_bounds.data_ptr() == b.chunk_bounds.data_ptr() and a.chunk_bounds.tolist() == want
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        assert _current_raw_stream(dev) == side.cuda_stream
        c, d = plan_prefill(cu, device=DEV), plan_prefill(cu, device=DEV)
        assert c.chunk_bounds.data_ptr() == d.chunk_bounds.data_ptr() != a.chunk_bounds.data_ptr()
        assert c.chunk_bounds.tolist() == want
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        e = plan_prefill(cu, device=DEV)
    graph.replay()
    torch.cuda.synchronize()
    assert e.chunk_bounds.data_ptr() not in (a.chunk_bounds.data_ptr(), c.chunk_bounds.data_ptr())
    assert e.chunk_bounds.tolist() == want
    assert plan_prefill(cu, device=DEV).chunk_bounds.data_ptr() == a.chunk_bounds.data_ptr()


@skip
def test_no_compile_after_warmup():
    from qla_serve.kernels import hopper

    variants = hopper.variants_for_heads(2, 4, pool_dtypes=("float32",), use_qk_l2norm=(False,),
                                         has_initial_state=(True,))
    # SGLang's form: packed q/k/v views, l2norm in the op (its pass and the variant after it)
    variants += hopper.variants_for_heads(2, 4, pool_dtypes=("float32",), use_qk_l2norm=(True,),
                                          has_initial_state=(False,), packed_qkv=(True,))
    hopper.warmup(variants, log=None)
    before = hopper.compile_count
    for bv in (64, 128):
        case = make_case([70, 5, 300], 2, 4, gmax=1.0, seed=bv)
        run_qla(case, block_v=bv)
        for lens in ([70, 5, 300], [1]):            # a 1-token batch runs on compact copies
            case = make_case(lens, 2, 4, gmax=1.0, seed=bv + 1, packed=True, l2_in_kernel=True,
                             hinit_mode="none", skip_every=0)
            run_qla(case, block_v=bv)
    torch.cuda.synchronize()
    assert hopper.compile_count == before


# ---------------------------------------------------------------------------------------------- CP (issue 4)
# Intra-card context parallelism: kernels/hopper/cp.py (plan, orchestration), cp_combine.py (combine),
# fused_fwd.py phases "partials" / "from_starts". QLA_CP_PARTS forces the longest sequence's P.


def _cp_tables_ref_chain(pool, idx, hinit, tab, scratch, layout, null_slot):
    """fp64 torch combine on the device tensors (the kernel's spec)."""
    nsp = tab.num_partial
    starts = torch.empty(tab.num_virtual, *scratch.shape[1:], dtype=torch.float64)
    vs, rows = tab.vs_offsets_h, tab.row_offsets_h
    sc = scratch.double().cpu()
    for j, slot in enumerate(idx):
        S = torch.zeros(scratch.shape[1:], dtype=torch.float64)
        if slot >= 0 and slot != null_slot and (hinit is None or hinit[j]):
            S = pool[slot].double().cpu()
        P = vs[j + 1] - vs[j]
        for p in range(P):
            starts[vs[j] + p] = S
            if p < P - 1:
                h, M = sc[rows[j] + p], sc[nsp + rows[j] + p]
                S = (S @ M if layout == "vk" else M @ S) + h
    return starts


CP_COMBINE_CASES = [
    # tag, seqlens, parts, HV, block_v, pool dtype, layout, hinit mode
    ("vk-fp32-bv128", [4096, 100, 2048, 640], [16, 1, 4, 3], 4, 128, torch.float32, "vk", "mix"),
    ("kv-bf16-bv64", [8192, 64, 700], [32, 1, 2], 8, 64, torch.bfloat16, "kv", "none"),
    ("vk-bf16-bv64", [3000, 3000], [8, 5], 2, 64, torch.bfloat16, "vk", "mix"),
    ("kv-fp32-bv128", [640, 6400], [2, 32], 2, 128, torch.float32, "kv", "mix"),
]


@skip
@pytest.mark.parametrize("tail", [False, True], ids=["exact", "tail-form"])
@pytest.mark.parametrize("tag,seqlens,parts,HV,bv,pdt,layout,hmode", CP_COMBINE_CASES,
                         ids=[c[0] for c in CP_COMBINE_CASES])
def test_cp_combine_kernel(tag, seqlens, parts, HV, bv, pdt, layout, hmode, tail):
    """The combine kernel alone vs an fp64 chain on random h / M (M scaled like a contraction).
    ``tail``: the tail-start form, with M_p = 0 where a random tail says w > 0 (as phase 1 stores
    it): bit for bit what the exact form gives on the same scratch where it writes a start, and
    no write where the previous partition was a tail start (phase 3 reads that h from scratch:
    there the exact form's start must equal it)."""
    from qla_serve.kernels import hopper
    from qla_serve.kernels.hopper import cp

    gen = torch.Generator().manual_seed(case_seed(tag))
    N = len(seqlens)
    tab = cp.build_tables(seqlens, parts, DEV)
    nsp = tab.num_partial
    scratch = torch.empty(2 * nsp, HV, K, V)
    scratch[:nsp] = torch.randn(nsp, HV, K, V, generator=gen)
    scratch[nsp:] = torch.randn(nsp, HV, K, K, generator=gen) * (0.15 / K ** 0.5) + torch.eye(K) * 0.6  # ‖M‖ < 1
    w = torch.randint(0, 3, (max(nsp, 1), HV), generator=gen, dtype=torch.int32)   # 0: exact step
    if tail:
        scratch[nsp:][w[:nsp] > 0] = 0.0
    scratch = scratch.to(DEV)
    slots = N + 3
    base = torch.randn(slots, 2, HV, K, V, generator=gen).to(pdt).to(DEV)
    pool = base[:, 0]                                       # strided rows
    idx = [i + 1 for i in range(N)]
    if N > 2:
        idx[1] = 0                                          # the null slot
    if N > 3:
        idx[3] = -1
    hinit = None if hmode == "none" else [i % 3 != 2 for i in range(N)]
    idx_d = torch.tensor(idx, dtype=torch.int32, device=DEV)
    hinit_d = (idx_d.view(torch.uint8)[:N] if hinit is None
               else torch.tensor(hinit, dtype=torch.bool, device=DEV).view(torch.uint8))
    starts = torch.full((tab.num_virtual, HV, K, V), float("nan"), device=DEV)
    pool_before = pool.clone()
    kern = cp.combine_kernel(HV, K, V, bv, hopper.POOL_DTYPES[pdt], layout, hinit is not None)
    kern(pool, idx_d, hinit_d, tab.vs_offsets, tab.row_offsets, scratch, starts, nsp, 0)
    if tail:
        exact, starts = starts, torch.full_like(starts, float("nan"))
        kern = cp.combine_kernel(HV, K, V, bv, hopper.POOL_DTYPES[pdt], layout, hinit is not None, read_tail=True)
        kern(pool, idx_d, hinit_d, tab.vs_offsets, tab.row_offsets, scratch, starts, nsp, 0, w.to(DEV))
    torch.cuda.synchronize()
    if tail:
        from_h = torch.zeros(tab.num_virtual, HV, dtype=torch.bool)    # starts phase 3 takes from scratch
        for j in range(N):
            for p in range(1, tab.vs_offsets_h[j + 1] - tab.vs_offsets_h[j]):
                from_h[tab.vs_offsets_h[j] + p] = w[tab.row_offsets_h[j] + p - 1] > 0
        assert from_h.any() and (~from_h).any()
        assert torch.isnan(starts[from_h.to(DEV)]).all(), f"{tag}: the tail form wrote a start phase 3 skips"
        written = (~from_h).to(DEV)
        assert torch.equal(starts[written], exact[written]), f"{tag}: the tail form must give the exact form's numbers"
        for vi, hv in from_h.nonzero().tolist():
            j = next(j for j in range(N) if tab.vs_offsets_h[j] <= vi < tab.vs_offsets_h[j + 1])
            row = tab.row_offsets_h[j] + vi - tab.vs_offsets_h[j] - 1
            assert torch.equal(exact[vi, hv], scratch[row, hv]), f"{tag}: a tail start's S must be its h"
        starts = exact
    assert torch.equal(pool, pool_before), "combine must not write the pool"
    ref = _cp_tables_ref_chain(pool, idx, hinit, tab, scratch, layout, 0)
    assert not torch.isnan(starts).any(), f"{tag}: unwritten starts"
    e = rel(starts, ref)
    worst = max(rel(starts[i], ref[i]) for i in range(tab.num_virtual) if ref[i].norm() > 0)
    msg = dict(case=f"cp-combine-{tag}{'-tail' if tail else ''}", starts_err=e, worst_row_err=worst)
    print(json.dumps(msg))
    if os.environ.get("QLA_ERR_LOG"):
        with open(os.environ["QLA_ERR_LOG"], "a") as f:
            f.write(json.dumps(msg) + "\n")
    assert worst < 1e-4, f"{tag}: combine error {worst:.3e}"


CP_CASES = [
    # tag, seqlens, H, HV, kwargs, P (longest), block_v, zero-gate head
    ("cp-gva2-fp32-vk-32k-g0.3-P16", [32768, 5, 300], 1, 2, dict(gmax=0.3, skip_every=0, hinit_mode="all",
                                                                  packed=True), 16, None, None),
    ("cp-2/8-bf16-kv-g30-P8", [8192, 1000], 2, 8, dict(gmax=30.0, pool_dtype=torch.bfloat16, layout="kv",
                                                        skip_every=0), 8, 64, 0),
    ("cp-1/4-fp32-kv-l2-null-P4", [4096, 64, 3000, 1, 2000], 1, 4, dict(gmax=1.0, layout="kv", skip_every=2,
                                                                        l2_in_kernel=True, packed=True), 4, 128, 1),
    ("cp-2/4-bf16-vk-noinit-P32", [6000, 700], 2, 4, dict(gmax=2.0, pool_dtype=torch.bfloat16, hinit_mode="none",
                                                          skip_every=0, strided_pool=False), 32, 128, None),
    # Counts other than powers of two (the rule's wave-filling picks since session 22: 7 + 1,
    # 14 + 2): uneven partitions of the longest, a power-of-two share for the other.
    ("cp-2/8-bf16-vk-P7", [5000, 700], 2, 8, dict(gmax=3.0, pool_dtype=torch.bfloat16, skip_every=0), 7, 128, None),
    ("cp-1/2-fp32-kv-P14", [7000, 1500, 1], 1, 2, dict(gmax=1.0, layout="kv", skip_every=0, packed=True), 14, 64, 0),
]


@skip
@pytest.mark.parametrize("tail", [False, True], ids=["exact", "tail-starts"])
@pytest.mark.parametrize("tag,seqlens,H,HV,kw,P,block_v,zero_head", CP_CASES, ids=[c[0] for c in CP_CASES])
def test_cp_prefill_matches_oracle_and_non_cp(tag, seqlens, H, HV, kw, P, block_v, zero_head, tail, monkeypatch):
    """The CP path vs the fp64 oracle and vs the non-CP path on the same inputs (both errors printed);
    outputs poisoned with NaN; pool rows of skipped slots untouched. ``tail``: QLA_CP_TAIL=1, the
    partials' tail-start form (exact to fp32 where a partition's tail decays by e^-45)."""
    from qla_serve.kernels.hopper import cp

    monkeypatch.setenv(cp.TAIL_ENV, "1" if tail else "0")
    monkeypatch.setenv(cp.POISON_ENV, "1")       # a start read from a row nothing wrote shows as NaN

    case = make_case(seqlens, H, HV, seed=case_seed(tag), **kw)
    if zero_head is not None:
        case["g"][:, zero_head] = 0.0                       # a head with no decay at all
    pool_before = case["pool"].cpu().clone()
    bf16_pool = case["pool"].dtype == torch.bfloat16
    s_tol = 8e-3 if bf16_pool else 5e-3

    monkeypatch.setenv(cp.FORCE_ENV, "1")                   # CP off
    out = run_qla(case, block_v=block_v)
    torch.cuda.synchronize()
    e_o_ref, e_s_ref = check(case, out, pool_before, f"{tag}-noncp", s_tol=s_tol)

    case["pool"].copy_(pool_before.to(DEV))
    monkeypatch.setenv(cp.FORCE_ENV, str(P))
    calls = []
    orig = cp.run_cp_hopper
    monkeypatch.setattr(cp, "run_cp_hopper", lambda *a, **kw: (calls.append(1), orig(*a, **kw)))
    out_cp = run_qla(case, block_v=block_v)
    torch.cuda.synchronize()
    assert calls, "the CP path did not run"
    e_o, e_s = check(case, out_cp, pool_before, tag, s_tol=s_tol)
    msg = dict(case=tag, cp_o_err=e_o, cp_state_err=e_s, noncp_o_err=e_o_ref, noncp_state_err=e_s_ref, P=P,
               tail_starts=tail)
    print(json.dumps(msg))
    if os.environ.get("QLA_ERR_LOG"):
        with open(os.environ["QLA_ERR_LOG"], "a") as f:
            f.write(json.dumps(msg) + "\n")
    assert e_o <= 1.25 * e_o_ref + 5e-4, f"{tag}: CP o error {e_o:.3e} vs non-CP {e_o_ref:.3e}"
    assert e_s <= 1.25 * e_s_ref + 5e-4, f"{tag}: CP state error {e_s:.3e} vs non-CP {e_s_ref:.3e}"


@skip
def test_cp_tail_scan_matches_tail_chunks():
    """cp_tail's kernel gives cp.tail_chunks' w exactly: chunk decays on a 1/4 grid (exact sums in
    fp32 both ways, some landing on −45 exactly: ≤ counts), heads that never decay (w = 0), heads
    whose partition is too short to decay far enough, partitions of different lengths (−1 ends)."""
    from qla_serve.kernels.hopper import cp

    gen = torch.Generator().manual_seed(case_seed("tail-scan"))
    seqlens, parts, HV = [40 * 64, 300 * 64 + 17, 9 * 64], [4, 2, 3], 8
    tab = cp.build_tables(seqlens, parts, DEV, tail=True)
    T_ = sum(seqlens)
    per_chunk = -0.25 * torch.randint(0, 60, (T_, HV), generator=gen).double()
    per_chunk[:, 0] = 0.0                        # never decays: the exact walk
    per_chunk[:, 1] = -45.0 / 4                  # four chunks reach −45 exactly
    per_chunk[:, 2] = -0.25                      # needs 180 chunks: more than any partition here has
    gcum = per_chunk.float().to(DEV)             # only chunk ends are read: any value per token will do
    want = cp.tail_chunks(gcum, tab)
    got = torch.full((tab.num_partial, HV), -7, dtype=torch.int32, device=DEV)     # poisoned
    cp.tail_scan_kernel(HV)(gcum, tab.tail_ends, got)
    assert torch.equal(got.cpu(), want.cpu()), (got, want)
    assert torch.equal(cp.tail_scan(gcum, tab).cpu(), want.cpu())
    w = want.cpu()
    # partial rows: 3 of the first sequence (10 chunks each), 1 of the second (150), 2 of the third
    # (3 chunks: too short for any head to reach −45)
    assert w.shape[0] == 6 and (w[:, 0] == 0).all() and (w[:4, 1] == 4).all() and (w[4:] == 0).all()
    assert (w[:, 2] == 0).all() and (w[:4, 3:] > 4).any()


@skip
def test_cp_cuda_graph_replay(monkeypatch):
    """The CP path (plan tables, scratch, combine, both phases) captured once, replayed on new inputs."""
    from qla_serve.kernels.hopper import cp

    monkeypatch.setenv(cp.FORCE_ENV, "8")
    monkeypatch.setenv(cp.POISON_ENV, "1")
    seqlens = [5000, 64, 1]
    T = sum(seqlens)
    case = make_case(seqlens, 2, 4, gmax=2.0, seed=21, skip_every=0)
    plan = case_plan(case)
    out = torch.full((T, 4, V), float("nan"), dtype=torch.bfloat16, device=DEV)
    run_qla(case, plan=plan, out=out)
    torch.cuda.synchronize()
    assert cp.plan_cp(plan, 4, V, plan.kernel_data[("hopper", 4, V)]["block_v"]) is not None
    capture_then_replay(case, plan, out, seqlens, (31, 32), "cp-cuda-graph-replay", gmax=2.0, skip_every=0)
