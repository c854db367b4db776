"""The reference backend against the fp64 token recurrence, through the public op contract."""
from __future__ import annotations

import pytest
import torch

from conftest import make_inputs, make_pool, oracle_for, rel_err
from qla_serve import chunk_gated_delta_rule, gdn_decode, gdn_prefill, plan_prefill
from qla_serve.reference import kv_to_pool, pool_to_kv, token_recurrence

# fp32 math on bf16 inputs: the error is the bf16 rounding of the output (~2e-3), not the algorithm.
TOL_BF16_OUT = 1e-2
TOL_FP32 = 1e-4


def _check_call(lens, H, HV, *, layout="vk", pool_dtype=torch.float32, dtype=torch.bfloat16, stride_pad=0,
                slots_for=None, has_init=None, null_slot=None, use_qk_l2norm=False, gate_scale=2.0,
                use_plan=False):
    q, k, v, g, beta, cu = make_inputs(lens, H, HV, dtype=dtype, gate_scale=gate_scale,
                                       normalize_k=not use_qk_l2norm)
    N = len(lens)
    slots = 2 * N + 3
    pool = make_pool(slots, HV, layout=layout, dtype=pool_dtype, row_stride_pad=stride_pad,
                     seed=torch.randint(0, 1000, ()).item())
    idx = slots_for if slots_for is not None else list(range(N + 2, 2 * N + 2))
    has = has_init if has_init is not None else [i % 2 == 0 for i in range(N)]
    ro, rs = oracle_for(q, k, v, g, beta, cu.tolist(), pool, idx, has, layout=layout, null_slot=null_slot,
                        use_qk_l2norm=use_qk_l2norm)
    before = pool.clone()
    out = torch.full((sum(lens), HV, 128), float("nan"), dtype=v.dtype)   # poison: every element must be written
    plan = plan_prefill(cu, state_indices_cpu=torch.tensor(idx), num_slots=slots, null_slot=null_slot) \
        if use_plan else None
    res = gdn_prefill(q, k, v, g, beta, state_pool=pool, state_indices=torch.tensor(idx, dtype=torch.int32),
                      cu_seqlens=cu, has_initial_state=torch.tensor(has), out=out, state_layout=layout,
                      null_slot=null_slot, use_qk_l2norm=use_qk_l2norm, plan=plan)
    assert res.data_ptr() == out.data_ptr()
    tol = TOL_FP32 if dtype == torch.float32 else TOL_BF16_OUT
    assert rel_err(out, ro) < tol
    live = [i for i, s in enumerate(idx) if s >= 0 and s != null_slot]
    state_tol = TOL_FP32 if pool_dtype == torch.float32 and dtype == torch.float32 else (
        2e-3 if pool_dtype == torch.float32 else 1e-2)
    for i in live:
        assert rel_err(pool_to_kv(pool[idx[i]], layout), rs[i]) < state_tol, f"state of sequence {i}"
    untouched = sorted(set(range(slots)) - {idx[i] for i in live})
    assert torch.equal(pool[untouched], before[untouched]), "rows of skipped/unused slots changed"
    cu_l = cu.tolist()
    for i in set(range(N)) - set(live):
        assert torch.equal(out[cu_l[i]:cu_l[i + 1]], torch.zeros_like(out[cu_l[i]:cu_l[i + 1]]))


@pytest.mark.parametrize("H,HV", [(2, 2), (2, 4), (1, 4)])
@pytest.mark.parametrize("layout", ["vk", "kv"])
def test_varlen_gva_layouts(H, HV, layout):
    _check_call([1, 63, 64, 65, 130, 7], H, HV, layout=layout)


@pytest.mark.parametrize("pool_dtype", [torch.float32, torch.bfloat16])
def test_pool_dtypes_and_strided_pool(pool_dtype):
    _check_call([1, 100, 64, 3], 2, 4, pool_dtype=pool_dtype, stride_pad=96)


def test_fp32_inputs_tight():
    _check_call([33, 1, 129], 1, 2, dtype=torch.float32, has_init=[True, True, False])


@pytest.mark.parametrize("use_qk_l2norm", [False, True])
def test_one_token_sequences_beside_chunks(use_qk_l2norm):
    """vLLM's mixed steps: decodes first as one-token sequences (one recurrence step each in the
    reference), then prefill chunks; null and negative slots among both; fp32 inputs, tight."""
    _check_call([1, 1, 1, 1, 130, 65, 1], 2, 8, dtype=torch.float32, use_qk_l2norm=use_qk_l2norm,
                slots_for=[3, 0, 5, -1, 7, 9, 11], null_slot=0, has_init=[True, True, False, True, False, True, True])
    _check_call([1, 1, 1], 1, 2, dtype=torch.float32, use_qk_l2norm=use_qk_l2norm)   # a decode-only call


def test_null_and_negative_slots_skipped():
    # vLLM: slot 0 is the null block; SGLang: negative indices are padding.
    _check_call([5, 70, 9, 1], 2, 4, slots_for=[3, 0, -1, 4], null_slot=0, has_init=[True, True, True, False])


def test_skipped_slot_may_repeat_and_plan_path():
    _check_call([20, 20, 20], 2, 2, slots_for=[-1, 5, -1], use_plan=True)


def test_has_initial_state_none_reads_every_row():
    q, k, v, g, beta, cu = make_inputs([40, 90], 2, 4)
    pool = make_pool(4, 4)
    ro, rs = oracle_for(q, k, v, g, beta, cu.tolist(), pool, [1, 2], [True, True])
    out = gdn_prefill(q, k, v, g, beta, state_pool=pool, state_indices=torch.tensor([1, 2]), cu_seqlens=cu)
    assert rel_err(out, ro) < TOL_BF16_OUT
    assert rel_err(pool_to_kv(pool[2], "vk"), rs[1]) < 2e-3


def test_very_negative_gates_and_in_op_l2norm():
    _check_call([200, 64], 2, 4, gate_scale=60.0, use_qk_l2norm=True)
    _check_call([130], 1, 1, gate_scale=0.0)  # g = 0: no decay at all


def test_strided_qkv_views_of_packed_buffer():
    lens, H, HV, K = [50, 77], 2, 4, 128
    T = sum(lens)
    mixed = torch.randn(T, (2 * H + HV) * K).bfloat16()     # vLLM/SGLang's mixed_qkv layout
    q, k, v = torch.split(mixed, [H * K, H * K, HV * K], dim=-1)
    q, k, v = q.view(T, H, K), k.view(T, H, K), v.view(T, HV, K)
    assert not q.is_contiguous()
    _, _, _, g, beta, cu = make_inputs(lens, H, HV)
    pool = make_pool(3, HV)
    ro, rs = oracle_for(q, k, v, g, beta, cu.tolist(), pool, [1, 2], [True, False], use_qk_l2norm=True)
    out = gdn_prefill(q, k, v, g, beta, state_pool=pool, state_indices=torch.tensor([1, 2]), cu_seqlens=cu,
                      has_initial_state=torch.tensor([True, False]), use_qk_l2norm=True)
    assert rel_err(out, ro) < TOL_BF16_OUT
    assert rel_err(pool_to_kv(pool[1], "vk"), rs[0]) < 2e-3


def test_chunked_prefill_equals_one_call():
    """One sequence fed in two calls through the pool equals one call: output and final state."""
    L, cut, H, HV = 300, 137, 2, 4
    q, k, v, g, beta, cu = make_inputs([L], H, HV, dtype=torch.float32)
    pool_a, pool_b = make_pool(2, HV), make_pool(2, HV)
    one = gdn_prefill(q, k, v, g, beta, state_pool=pool_a, state_indices=torch.tensor([1]), cu_seqlens=cu,
                      has_initial_state=torch.tensor([False]))
    parts = []
    for a, b, has in ((0, cut, False), (cut, L, True)):
        parts.append(gdn_prefill(q[a:b], k[a:b], v[a:b], g[a:b], beta[a:b], state_pool=pool_b,
                                 state_indices=torch.tensor([1]), cu_seqlens=torch.tensor([0, b - a]),
                                 has_initial_state=torch.tensor([has])))
    assert rel_err(torch.cat(parts), one.double()) < 1e-5
    assert rel_err(pool_b[1], pool_a[1].double()) < 1e-5


@pytest.mark.parametrize("layout", ["vk", "kv"])
def test_decode_after_prefill_matches_oracle(layout):
    lens, steps, H, HV = [70, 5, 1], 4, 2, 4
    total = [n + steps for n in lens]
    q, k, v, g, beta, _ = make_inputs(total, H, HV, dtype=torch.float32)
    cu_full = torch.tensor([0] + torch.tensor(total).cumsum(0).tolist())
    pool = make_pool(5, HV, layout=layout)
    idx = [3, 1, 4]
    ro, rs = oracle_for(q, k, v, g, beta, cu_full.tolist(), pool, idx, [True, False, True], layout=layout)
    starts = cu_full[:-1].tolist()
    pre = torch.cat([torch.arange(s, s + n) for s, n in zip(starts, lens)])
    cu_pre = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist())
    gdn_prefill(q[pre], k[pre], v[pre], g[pre], beta[pre], state_pool=pool, state_indices=torch.tensor(idx),
                cu_seqlens=cu_pre, has_initial_state=torch.tensor([True, False, True]), state_layout=layout)
    for t in range(steps):
        rows = torch.tensor([s + n + t for s, n in zip(starts, lens)])
        o = gdn_decode(q[rows], k[rows], v[rows], g[rows], beta[rows], state_pool=pool,
                       state_indices=torch.tensor(idx), state_layout=layout)
        assert rel_err(o, ro[rows]) < TOL_FP32
    for i, s in enumerate(idx):
        assert rel_err(pool_to_kv(pool[s], layout), rs[i]) < TOL_FP32


def test_decode_skips_null_slots_and_accepts_one_token_dim():
    q, k, v, g, beta, _ = make_inputs([1, 1, 1], 2, 4, dtype=torch.float32)
    pool = make_pool(4, 4)
    before = pool.clone()
    o = gdn_decode(q[:, None], k[:, None], v[:, None], g[:, None], beta[:, None], state_pool=pool,
                   state_indices=torch.tensor([2, 0, -1]), null_slot=0)
    assert o.shape == (3, 1, 4, 128)
    assert torch.equal(o[1:], torch.zeros_like(o[1:]))
    assert torch.equal(pool[[0, 1, 3]], before[[0, 1, 3]])
    ro, _ = token_recurrence(q[:1], k[:1], v[:1], g[:1], beta[:1], [0, 1], pool_to_kv(before[2:3], "vk"))
    assert rel_err(o[0, 0], ro[0]) < TOL_FP32


@pytest.mark.parametrize("use_l2", [False, True])
def test_chunk_gated_delta_rule_matches_transformers(use_l2):
    from transformers.models.qwen3_next.modeling_qwen3_next import torch_chunk_gated_delta_rule

    B, T, H, HV = 2, 150, 2, 4
    q, k, v, g, beta, _ = make_inputs([T] * B, H, HV, dtype=torch.float32, normalize_k=not use_l2)
    q, k, v, g, beta = (x.reshape(B, T, *x.shape[1:]) for x in (q, k, v, g, beta))
    h0 = torch.randn(B, HV, 128, 128) * 0.1
    ref_o, ref_s = torch_chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0.clone(), output_final_state=True,
                                                use_qk_l2norm_in_kernel=use_l2)
    o, s = chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                                  use_qk_l2norm_in_kernel=use_l2)
    assert o.shape == ref_o.shape and s.shape == ref_s.shape
    assert rel_err(o, ref_o) < TOL_FP32 and rel_err(s, ref_s) < TOL_FP32


def test_chunk_gated_delta_rule_varlen_and_state_v_first():
    lens = [10, 100]
    q, k, v, g, beta, cu = make_inputs(lens, 2, 2, dtype=torch.float32)
    h0 = torch.randn(2, 2, 128, 128) * 0.1
    ro, rs = token_recurrence(q, k, v, g, beta, cu.tolist(), h0)
    o, s = chunk_gated_delta_rule(q[None], k[None], v[None], g[None], beta[None], initial_state=h0.transpose(-1, -2),
                                  output_final_state=True, cu_seqlens=cu.long(), state_v_first=True)
    assert rel_err(o[0], ro) < TOL_FP32 and rel_err(s.transpose(-1, -2), rs) < TOL_FP32
    with pytest.raises(NotImplementedError, match="use_gate_in_kernel"):
        chunk_gated_delta_rule(q[None], k[None], v[None], g[None], beta[None], use_gate_in_kernel=True)


def test_checkpoints_hold_state_before_each_chunk():
    lens = [130, 5]
    q, k, v, g, beta, cu = make_inputs(lens, 2, 4, dtype=torch.float32)
    pool = make_pool(3, 4)
    h0 = pool_to_kv(pool[1], "vk").clone()
    plan = plan_prefill(cu)
    ck = torch.full((1, plan.num_chunks, 4, 128, 128), float("nan"))
    gdn_prefill(q, k, v, g, beta, state_pool=pool, state_indices=torch.tensor([1, 2]), cu_seqlens=cu,
                has_initial_state=torch.tensor([True, False]), checkpoints=ck, plan=plan)
    assert plan.num_chunks == 4
    for c, t in enumerate((0, 64, 128)):   # sequence 0: chunks start at tokens 0, 64, 128
        if t == 0:
            ref = h0.double()
        else:
            _, s = token_recurrence(q[:t], k[:t], v[:t], g[:t], beta[:t], [0, t], h0[None])
            ref = s[0]
        assert rel_err(pool_to_kv(ck[0, c], "vk"), ref) < TOL_FP32
    assert torch.equal(ck[0, 3], torch.zeros_like(ck[0, 3]))   # sequence 1 starts from zero
    assert kv_to_pool(h0, "vk").shape == pool[1].shape


def test_strided_index_columns():
    """vLLM hands block_table[:, 0] (a strided column) as the state indices."""
    lens = [30, 70]
    block_table = torch.tensor([[2, 9, 9], [4, 9, 9]], dtype=torch.int32)
    has = torch.tensor([[True, False], [False, True]])[:, 0]
    assert not block_table[:, 0].is_contiguous()
    _check_call(lens, 2, 4, slots_for=block_table[:, 0].tolist(), has_init=has.tolist())
    q, k, v, g, beta, cu = make_inputs(lens, 2, 4)
    pool = make_pool(5, 4)
    ro, rs = oracle_for(q, k, v, g, beta, cu.tolist(), pool, [2, 4], [True, False])
    out = gdn_prefill(q, k, v, g, beta, state_pool=pool, state_indices=block_table[:, 0], cu_seqlens=cu,
                      has_initial_state=torch.tensor([True, False]))
    assert rel_err(out, ro) < TOL_BF16_OUT
    assert rel_err(pool_to_kv(pool[4], "vk"), rs[1]) < 2e-3
