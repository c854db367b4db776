"""Every bad input gets a ValueError/TypeError naming the argument, and the pool stays bit-identical."""
from __future__ import annotations

import logging

import pytest
import torch

from conftest import make_inputs, make_pool
from qla_serve import dispatch, gdn_decode, gdn_prefill, plan_prefill

LENS, H, HV = [5, 70, 1], 2, 4


def _good():
    q, k, v, g, beta, cu = make_inputs(LENS, H, HV)
    return dict(q=q, k=k, v=v, g=g, beta=beta, state_pool=make_pool(6, HV), state_indices=torch.tensor([1, 3, 4]),
                cu_seqlens=cu, has_initial_state=torch.tensor([True, False, True]))


def _bad_cases():
    T = sum(LENS)
    cases = {
        "q_not_tensor": (TypeError, "q must be a torch.Tensor", lambda a: a.update(q=a["q"].tolist())),
        "q_2d": (ValueError, "q must be 3-D", lambda a: a.update(q=a["q"][:, 0])),
        "q_leading_batch_2": (ValueError, "q: a leading batch dim must be 1",
                              lambda a: a.update(q=a["q"].expand(2, *a["q"].shape))),
        "k_shape": (ValueError, "k shape", lambda a: a.update(k=a["k"][:, :1])),
        "v_tokens": (ValueError, "v has", lambda a: a.update(v=a["v"][:-1])),
        "gva_ratio": (ValueError, "multiple of q/k heads", lambda a: a.update(v=a["v"][:, :3])),
        "q_dtype": (TypeError, "q dtype", lambda a: a.update(q=a["q"].to(torch.int32))),
        "k_dtype": (TypeError, "k dtype", lambda a: a.update(k=a["k"].float())),
        "q_last_dim_strided": (ValueError, "q must have a contiguous last dim",
                               lambda a: a.update(q=a["q"].transpose(1, 2).contiguous().transpose(1, 2))),
        "g_shape": (ValueError, "g must have shape", lambda a: a.update(g=a["g"][:, :2])),
        "beta_dtype": (TypeError, "beta must be floating", lambda a: a.update(beta=(a["beta"] > 0.5))),
        "pool_shape": (ValueError, "state_pool must be", lambda a: a.update(state_pool=make_pool(6, HV, K=64))),
        "pool_dtype": (TypeError, "state_pool dtype", lambda a: a.update(state_pool=make_pool(6, HV).double())),
        "pool_inner_strided": (ValueError, "state_pool rows must be contiguous",
                               lambda a: a.update(state_pool=make_pool(6, HV).transpose(2, 3))),
        "layout": (ValueError, "state_layout must be", lambda a: a.update(state_layout="kvv")),
        "cu_dtype": (TypeError, "cu_seqlens dtype", lambda a: a.update(cu_seqlens=a["cu_seqlens"].float())),
        "cu_non_monotonic": (ValueError, "cu_seqlens must be non-decreasing",
                             lambda a: a.update(cu_seqlens=torch.tensor([0, 50, 5, T], dtype=torch.int32))),
        "cu_start": (ValueError, "cu_seqlens must start at 0",
                     lambda a: a.update(cu_seqlens=torch.tensor([1, 5, 75, T], dtype=torch.int32))),
        "cu_total": (ValueError, r"cu_seqlens\[-1\] = 75 must equal",
                     lambda a: a.update(cu_seqlens=torch.tensor([0, 5, 70, 75], dtype=torch.int32))),
        "indices_len": (ValueError, "state_indices must have shape",
                        lambda a: a.update(state_indices=torch.tensor([1, 3]))),
        "indices_dtype": (TypeError, "state_indices dtype",
                          lambda a: a.update(state_indices=torch.tensor([1.0, 3.0, 4.0]))),
        "slot_out_of_range": (ValueError, r"state_indices\[2\] = 6 is out of range",
                              lambda a: a.update(state_indices=torch.tensor([1, 3, 6]))),
        "slot_shared": (ValueError, "slot 3 is given to sequences 0 and 1",
                        lambda a: a.update(state_indices=torch.tensor([3, 3, 4]))),
        "has_init_dtype": (TypeError, "has_initial_state must be bool",
                           lambda a: a.update(has_initial_state=torch.tensor([1, 0, 1]))),
        "has_init_shape": (ValueError, "has_initial_state must have shape",
                           lambda a: a.update(has_initial_state=torch.tensor([True]))),
        "out_shape": (ValueError, "out must have shape", lambda a: a.update(out=torch.empty(T, HV, 64).bfloat16())),
        "out_dtype": (TypeError, "out dtype", lambda a: a.update(out=torch.empty(T, HV, 128))),
        "checkpoints_shape": (ValueError, "checkpoints must have shape",
                              lambda a: a.update(checkpoints=torch.empty(1, 2, HV, 128, 128))),
        "plan_type": (TypeError, "plan must be a PrefillPlan", lambda a: a.update(plan={"cu": [0]})),
        "plan_mismatch": (ValueError, "plan describes 2 sequences",
                          lambda a: a.update(plan=plan_prefill([0, 5, 76]))),
        "null_slot_type": (TypeError, "null_slot must be an int", lambda a: a.update(null_slot="0")),
        "pool_device": (ValueError, "state_pool is on meta",
                        lambda a: a.update(state_pool=torch.empty(6, HV, 128, 128, device="meta"))),
    }
    return cases


@pytest.mark.parametrize("case", sorted(_bad_cases()))
def test_bad_prefill_input_is_named_and_pool_untouched(case):
    exc, match, mutate = _bad_cases()[case]
    args = _good()
    mutate(args)
    pool = args["state_pool"]
    before = pool.clone() if pool.device.type != "meta" else None
    q, k, v, g, beta = (args.pop(n) for n in ("q", "k", "v", "g", "beta"))
    with pytest.raises(exc, match=match):
        gdn_prefill(q, k, v, g, beta, **args)
    if before is not None:
        assert torch.equal(pool, before)


def test_good_input_passes():
    args = _good()
    q, k, v, g, beta = (args.pop(n) for n in ("q", "k", "v", "g", "beta"))
    out = gdn_prefill(q, k, v, g, beta, **args)
    assert out.shape == (sum(LENS), HV, 128) and torch.isfinite(out).all()


def test_plan_call_reads_nothing_from_the_device(monkeypatch):
    """With a plan, validation touches metadata only: any host read of tensor data would sync a GPU."""
    args = _good()
    args["plan"] = plan_prefill(args["cu_seqlens"], state_indices_cpu=args["state_indices"], num_slots=6)
    ran = []
    monkeypatch.setattr(dispatch, "run", lambda op, call: ran.append(op) or "stub")

    def forbidden(*a, **kw):
        raise AssertionError("gdn_prefill read tensor data on the host despite a plan")

    for name in ("tolist", "item", "cpu", "numpy", "__bool__", "__int__", "__index__"):
        monkeypatch.setattr(torch.Tensor, name, forbidden)
    q, k, v, g, beta = (args.pop(n) for n in ("q", "k", "v", "g", "beta"))
    gdn_prefill(q, k, v, g, beta, **args)
    assert ran == ["prefill"]
    with pytest.raises(ValueError, match="must equal the number of tokens"):
        gdn_prefill(q[:-1], k[:-1], v[:-1], g[:-1], beta[:-1], **args)


def test_plan_rejects_bad_host_metadata():
    with pytest.raises(ValueError, match="non-decreasing"):
        plan_prefill([0, 10, 4])
    with pytest.raises(ValueError, match="CPU tensor"):
        plan_prefill(torch.tensor([0, 4], device="meta"))
    with pytest.raises(ValueError, match="num_slots is required"):
        plan_prefill([0, 4], state_indices_cpu=[1])
    with pytest.raises(ValueError, match="state_indices has 2 entries"):
        plan_prefill([0, 4], state_indices_cpu=[1, 2], num_slots=4)
    plan = plan_prefill([0, 1, 65, 65, 200])
    assert plan.seqlens == (1, 64, 0, 135) and plan.num_chunks == 1 + 1 + 0 + 3
    assert plan.chunk_bounds.tolist() == [[0, 1, 0, 0], [1, 65, 1, 1], [65, 200, 65, 3], [129, 200, 65, 3],
                                          [193, 200, 65, 3]]


@pytest.mark.parametrize("seed", range(5))
def test_plan_tables_match_their_definition(seed):
    """The vectorised tables equal the per-sequence, per-chunk definition (empty sequences, 1-token
    ones, multiples of 64 and not, a tensor or a list as input)."""
    gen = torch.Generator().manual_seed(seed)
    seqlens = [int(x) for x in torch.randint(0, 300, (int(torch.randint(1, 40, (1,), generator=gen)),), generator=gen)]
    seqlens[0] = 1
    cu = [0]
    for n in seqlens:
        cu.append(cu[-1] + n)
    for given in (cu, torch.tensor(cu, dtype=torch.int64)):
        plan = plan_prefill(given)
        chunks = [(i + 63) // 64 for i in seqlens]
        assert plan.seqlens == tuple(seqlens) and plan.total_tokens == cu[-1]
        assert plan.num_chunks == sum(chunks) and plan.max_seqlen == max(seqlens)
        assert plan.cu_seqlens.dtype == plan.chunk_offsets.dtype == plan.chunk_bounds.dtype == torch.int32
        assert plan.cu_seqlens.tolist() == cu == plan.cu_seqlens_cpu.tolist()
        assert plan.chunk_offsets.tolist() == [sum(chunks[:i]) for i in range(len(chunks) + 1)]
        assert plan.chunk_bounds.tolist() == [[cu[i] + 64 * c, cu[i + 1], cu[i], i] for i, n in enumerate(chunks)
                                              for c in range(n)]
        # sequences longest first, ties in batch order (the persistent walk deals them out in this order)
        assert plan.seq_order.tolist() == sorted(range(len(seqlens)), key=lambda i: (-seqlens[i], i))
        # the four device tables are views of one staged buffer (one host→device copy), 16-byte aligned
        tabs = (plan.cu_seqlens, plan.chunk_offsets, plan.chunk_bounds, plan.seq_order)
        assert len({t.untyped_storage().data_ptr() for t in tabs}) == 1
        assert all(t.data_ptr() % 16 == 0 and t.is_contiguous() for t in tabs)
    empty = plan_prefill([0, 0])
    assert empty.num_chunks == 0 and tuple(empty.chunk_bounds.shape) == (0, 4)


def test_plans_of_one_batch_shape_share_host_work_and_device_tables():
    """The host tables of a batch shape are kept (qla_serve.plan._host_tables), and so are their
    device copies (StagedInt32.shared_to: read-only by contract); bad metadata is refused every time
    (errors are not kept); a cleared cache makes new tables."""
    from qla_serve.plan import _host_tables, clear_host_caches

    clear_host_caches()
    a = plan_prefill([0, 100, 300])
    b = plan_prefill(torch.tensor([0, 100, 300], dtype=torch.int64))
    assert _host_tables.cache_info().hits == 1
    assert a.chunk_bounds.untyped_storage().data_ptr() == b.chunk_bounds.untyped_storage().data_ptr()
    assert a.chunk_bounds.tolist() == [[0, 100, 0, 0], [64, 100, 0, 0], [100, 300, 100, 1],
                                       [164, 300, 100, 1], [228, 300, 100, 1], [292, 300, 100, 1]]
    for _ in range(2):
        with pytest.raises(ValueError, match="non-decreasing"):
            plan_prefill([0, 10, 4])
    clear_host_caches()
    assert _host_tables.cache_info().currsize == 0
    c = plan_prefill([0, 100, 300])
    assert c.chunk_bounds.untyped_storage().data_ptr() != a.chunk_bounds.untyped_storage().data_ptr()
    assert c.chunk_bounds.tolist() == a.chunk_bounds.tolist()


def test_bad_decode_input_is_named_and_pool_untouched():
    q, k, v, g, beta, _ = make_inputs([1, 1], H, HV)
    pool = make_pool(4, HV)
    before = pool.clone()
    with pytest.raises(ValueError, match=r"state_indices\[1\] = 9 is out of range"):
        gdn_decode(q, k, v, g, beta, state_pool=pool, state_indices=torch.tensor([1, 9]))
    with pytest.raises(ValueError, match="slot 2 is given to sequences 0 and 1"):
        gdn_decode(q, k, v, g, beta, state_pool=pool, state_indices=torch.tensor([2, 2]))
    with pytest.raises(ValueError, match="g must have shape"):
        gdn_decode(q, k, v, g[:, :1], beta, state_pool=pool, state_indices=torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="must be \\[N, 1, heads, dim\\]"):
        gdn_decode(q[:, None].expand(2, 2, H, 128), k[:, None], v[:, None], g, beta, state_pool=pool,
                   state_indices=torch.tensor([1, 2]))
    assert torch.equal(pool, before)


def test_forced_backend_and_bad_env(monkeypatch):
    args = _good()
    q, k, v, g, beta = (args.pop(n) for n in ("q", "k", "v", "g", "beta"))
    monkeypatch.setenv("QLA_BACKEND", "tilelang")
    with pytest.raises(RuntimeError, match="QLA_BACKEND=tilelang cannot run this prefill call: needs a CUDA"):
        gdn_prefill(q, k, v, g, beta, **args)
    monkeypatch.setenv("QLA_BACKEND", "fastest")
    with pytest.raises(ValueError, match="QLA_BACKEND='fastest'"):
        gdn_prefill(q, k, v, g, beta, **args)
    monkeypatch.setenv("QLA_BACKEND", "reference")
    before = dispatch.calls[("prefill", "reference")]
    gdn_prefill(q, k, v, g, beta, **args)
    assert dispatch.calls[("prefill", "reference")] == before + 1


def test_fallback_logs_once(monkeypatch, caplog):
    monkeypatch.delenv("QLA_BACKEND", raising=False)
    monkeypatch.setattr(dispatch, "_logged", set())
    with caplog.at_level(logging.WARNING, logger="qla_serve"):
        for _ in range(3):
            args = _good()
            q, k, v, g, beta = (args.pop(n) for n in ("q", "k", "v", "g", "beta"))
            gdn_prefill(q, k, v, g, beta, **args)
    lines = [r.getMessage() for r in caplog.records if "tilelang unavailable" in r.getMessage()]
    assert lines == ["qla-serve: prefill backend tilelang unavailable for this call (needs a CUDA device, got cpu); "
                     "using reference"]


def test_plan_without_indices_still_checks_host_indices():
    """A plan built from lengths alone cannot vouch for the slots; CPU-resident indices are checked free."""
    args = _good()
    args["plan"] = plan_prefill(args["cu_seqlens"])
    args["state_indices"] = torch.tensor([4, 1, 4])
    pool = args["state_pool"]
    before = pool.clone()
    q, k, v, g, beta = (args.pop(n) for n in ("q", "k", "v", "g", "beta"))
    with pytest.raises(ValueError, match="slot 4 is given to sequences 0 and 2"):
        gdn_prefill(q, k, v, g, beta, **args)
    assert torch.equal(pool, before)


def _gating_oracle(a, b, A_log, dt_bias, threshold=20.0):
    """fp64, written out: g = −exp(A_log)·softplus(a + dt_bias) (x above the threshold), β = sigmoid(b)."""
    x = a.double() + dt_bias.double()
    sp = torch.where(x > threshold, x, torch.log1p(torch.exp(x)))
    return -torch.exp(A_log.double()) * sp, 1.0 / (1.0 + torch.exp(-b.double()))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_gating_matches_its_formula(dtype):
    from qla_serve import gdn_gating

    gen = torch.Generator().manual_seed(11)
    T, HV = 37, 8
    a = (4 * torch.randn(T, HV, generator=gen)).to(dtype)
    a[0, 0] = 30.0                      # above the softplus threshold: g = −exp(A_log)·x
    b = (3 * torch.randn(T, HV, generator=gen)).to(dtype)
    A_log, dt_bias = torch.randn(HV, generator=gen), torch.randn(HV, generator=gen).to(dtype)
    g, beta = gdn_gating(a, b, A_log, dt_bias)
    assert g.dtype == beta.dtype == torch.float32 and g.shape == beta.shape == (T, HV)
    g_ref, b_ref = _gating_oracle(a, b, A_log, dt_bias)
    assert torch.allclose(g.double(), g_ref, rtol=1e-5, atol=1e-6)
    assert torch.allclose(beta.double(), b_ref, rtol=1e-5, atol=1e-6)
    g1, _ = gdn_gating(a[None], b[None], A_log, dt_bias)           # FLA's leading 1 is accepted
    assert torch.equal(g1, g)


def test_bad_gating_input_is_named():
    from qla_serve import gdn_gating

    a, b, p = torch.randn(4, 8), torch.randn(4, 8), torch.randn(8)
    with pytest.raises(ValueError, match="b shape"):
        gdn_gating(a, b[:, :4], p, p)
    with pytest.raises(ValueError, match=r"dt_bias must have shape \[8\]"):
        gdn_gating(a, b, p, p[:4])
    with pytest.raises(TypeError, match="A_log dtype"):
        gdn_gating(a, b, p.long(), p)
    with pytest.raises(TypeError, match="a must be a torch.Tensor"):
        gdn_gating(a.tolist(), b, p, p)


def _gate_inputs(T, hv, seed=5):
    from qla_serve import GateInputs

    gen = torch.Generator().manual_seed(seed)
    return GateInputs((3 * torch.randn(T, hv, generator=gen)).bfloat16(), (2 * torch.randn(T, hv, generator=gen)).bfloat16(),
                      torch.randn(hv, generator=gen), torch.randn(hv, generator=gen).bfloat16())


@pytest.mark.parametrize("l2", [False, True])
def test_prefill_with_gate_inputs_equals_gating_then_prefill(l2):
    """gdn_prefill(gates=...) is gdn_gating followed by gdn_prefill on its g and beta, bit for bit
    (reference backend), with and without the op's l2norm."""
    from qla_serve import gdn_gating

    args = _good()
    T = sum(LENS)
    gates = _gate_inputs(T, HV)
    args["plan"] = plan_prefill(args["cu_seqlens"], state_indices_cpu=args["state_indices"], num_slots=6)
    pool0 = args["state_pool"].clone()
    q, k, v = (args.pop(n) for n in ("q", "k", "v"))
    args.pop("g"), args.pop("beta")
    g, beta = gdn_gating(*gates[:4])
    want = gdn_prefill(q, k, v, g, beta, use_qk_l2norm=l2, **args)
    pool_want = args["state_pool"].clone()
    args["state_pool"].copy_(pool0)
    got = gdn_prefill(q, k, v, gates=gates, use_qk_l2norm=l2, **args)
    assert torch.equal(got, want) and torch.equal(args["state_pool"], pool_want)
    leading = gates._replace(a=gates.a[None], b=gates.b[None])        # FLA's leading 1 is accepted
    args["state_pool"].copy_(pool0)
    assert torch.equal(gdn_prefill(q, k, v, gates=leading, use_qk_l2norm=l2, **args), want)
    with pytest.raises(ValueError, match="not both"):     # this form is known now: still checked
        gdn_prefill(q, k, v, g, beta, gates=gates, use_qk_l2norm=l2, **args)


def test_bad_gate_inputs_are_named_and_leave_the_pool_untouched():
    from qla_serve import GateInputs

    T = sum(LENS)
    gates = _gate_inputs(T, HV)
    cases = [
        (ValueError, "needs g and beta, or gates", dict(g=None)),
        (ValueError, "needs g and beta, or gates", dict(g=None, beta=None)),
        (ValueError, "not both", dict(gates=gates)),
        (TypeError, "gates must be a qla_serve.GateInputs", dict(g=None, beta=None, gates=tuple(gates))),
        (ValueError, r"gates.a and gates.b must have shape \[T, HV\]",
         dict(g=None, beta=None, gates=gates._replace(a=gates.a[:-1], b=gates.b[:-1]))),
        (ValueError, "gates.b shape", dict(g=None, beta=None, gates=gates._replace(b=gates.b[:, :2]))),
        (ValueError, r"gates.dt_bias must have shape \[4\]",
         dict(g=None, beta=None, gates=gates._replace(dt_bias=gates.dt_bias[:2]))),
        (TypeError, "gates.A_log dtype", dict(g=None, beta=None, gates=gates._replace(A_log=gates.A_log.long()))),
        (TypeError, "gates.a must be a torch.Tensor", dict(g=None, beta=None, gates=gates._replace(a=gates.a.tolist()))),
        (ValueError, "gates.b is on meta", dict(g=None, beta=None, gates=gates._replace(b=gates.b.to("meta")))),
        (TypeError, "gates.softplus_threshold must be a number",
         dict(g=None, beta=None, gates=gates._replace(softplus_threshold="20"))),
    ]
    for exc, match, change in cases:
        args = _good()
        args.update(change)
        before = args["state_pool"].clone()
        q, k, v = (args.pop(n) for n in ("q", "k", "v"))
        with pytest.raises(exc, match=match):
            gdn_prefill(q, k, v, **args)
        assert torch.equal(args["state_pool"], before)
    assert GateInputs(*gates[:4]).softplus_threshold == 20.0


def test_a_known_call_form_still_gets_every_count_checked():
    """After a call of one form passed validation, later calls of that form skip re-validating it
    (api._VALIDATED_FORMS) but not their token and sequence counts: a count that does not fit
    raises the same named error, and the pool stays untouched."""
    from qla_serve import api

    args = _good()
    q, k, v, g, beta = (args.pop(n) for n in ("q", "k", "v", "g", "beta"))
    args["plan"] = plan_prefill(args["cu_seqlens"], state_indices_cpu=args["state_indices"], num_slots=6)
    gdn_prefill(q, k, v, g, beta, **args)
    form = api._prefill_form(q, k, v, g, beta, None, args["state_pool"], args["state_indices"], args["cu_seqlens"],
                             args["has_initial_state"], None, args["plan"], None, None, False, "vk", None)
    assert form is not None and form in api._VALIDATED_FORMS, (form, len(api._VALIDATED_FORMS))
    pool0, want = args["state_pool"].clone(), None
    with pytest.MonkeyPatch.context() as mp:            # a repeated good call re-validates nothing
        mp.setattr(api, "_check_qkv", lambda *a: pytest.fail("the known form was validated again"))
        want = gdn_prefill(q, k, v, g, beta, **args)
    args["state_pool"].copy_(pool0)
    assert torch.equal(gdn_prefill(q[None], k[None], v[None], g[None], beta[None], **args)[0], want)  # full path
    other = plan_prefill(torch.tensor([0, 5, 69, 70]), state_indices_cpu=args["state_indices"], num_slots=6)  # 1 token fewer
    cases = [
        (ValueError, "v has", dict(v=v[:-1])),
        (ValueError, r"g must have shape", dict(g=g[:-1])),
        (ValueError, r"cu_seqlens\[-1\] = 70 must equal the number of tokens T = 76", dict(plan=other)),
        (ValueError, r"state_indices must have shape \[3\]", dict(state_indices=args["state_indices"][:2])),
        (ValueError, r"has_initial_state must have shape \[3\]",
         dict(has_initial_state=args["has_initial_state"][:2])),
        (ValueError, "out must have shape", dict(out=torch.empty(sum(LENS) - 1, HV, 128))),
    ]
    for exc, match, change in cases:
        call = dict(q=q, k=k, v=v, g=g, beta=beta, **args)
        call.update(change)
        before = args["state_pool"].clone()
        with pytest.raises(exc, match=match):
            gdn_prefill(**call)
        assert torch.equal(args["state_pool"], before)
