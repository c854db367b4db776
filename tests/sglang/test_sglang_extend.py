"""The qla kernel adapter's ``extend`` on SGLang-shaped inputs, against SGLang's own pure-torch GDN
reference and transformers' ``torch_chunk_gated_delta_rule``: outputs, pool rows written, rows left
alone, padding, prefix states, fp32/bf16 pools, strided q/k/v, the radix-cache track snapshot."""
from __future__ import annotations

import pytest
import torch

from qla_sgl_helpers import make_batch, rel, sglang_reference, transformers_reference
from qla_serve.integrations.sglang.kernel import QLAGDNKernel

pytestmark = pytest.mark.sglang

OUT_TOL = 1e-2                      # bf16 outputs
STATE_TOL = {torch.float32: 1e-4, torch.bfloat16: 1e-2}


def run_extend(batch, kernel=None, *, host=True, **kw):
    kernel = kernel or QLAGDNKernel()
    q, k, v = batch.qkv()
    g, beta = batch.gates()
    pool = batch.pool.clone()
    if host:
        kernel.host_seqlens = list(batch.lens)
    try:
        o, last, h = kernel.extend(q, k, v, g, beta, ssm_states=pool,
                                   cache_indices=torch.tensor(batch.slots, dtype=torch.int32),
                                   query_start_loc=batch.cu, **kw)
    finally:
        kernel.host_seqlens = None
    return o, last, h, pool


def token_ranges(batch):
    cu = batch.cu.tolist()
    return [(slot, cu[i], cu[i + 1]) for i, slot in enumerate(batch.slots)]


@pytest.mark.parametrize("pool_dtype", [torch.float32, torch.bfloat16])
def test_extend_matches_sglang_and_transformers(pool_dtype):
    # prefix states: every live row starts from a random (non-zero) state, as after a cached prefix
    batch = make_batch((70, 1, 130, 33), [3, 0, 7, 5], pool_dtype=pool_dtype, seed=1)
    q, _, _ = batch.qkv()
    assert not q.is_contiguous() and q.stride(-1) == 1       # strided views of mixed_qkv
    o, last, h, pool = run_extend(batch)
    assert last is None and h is None
    assert o.shape == (1, sum(batch.lens), 4, 128) and o.dtype == torch.bfloat16

    ref_o, ref_pool = sglang_reference(batch)
    tr_o, tr_final = transformers_reference(batch)
    assert rel(o, ref_o) < OUT_TOL
    assert rel(o[0], tr_o) < OUT_TOL
    for slot in batch.slots:
        assert rel(pool[slot], ref_pool[slot]) < STATE_TOL[pool_dtype], slot
        assert rel(pool[slot], tr_final[slot]) < STATE_TOL[pool_dtype], slot
    for row in set(range(pool.shape[0])) - set(batch.slots):
        assert torch.equal(pool[row], batch.pool[row]), f"row {row} was written"


def test_padding_sequences_are_skipped():
    batch = make_batch((40, 65, 3, 64), [2, -1, 6, -1], seed=2)
    o, _, _, pool = run_extend(batch)
    ref_o, ref_pool = sglang_reference(batch)
    for slot, s, e in token_ranges(batch):
        if slot < 0:
            assert torch.count_nonzero(o[0, s:e]) == 0, "padding output must be zero"
        else:
            assert rel(o[0, s:e], ref_o[0, s:e]) < OUT_TOL
            assert rel(pool[slot], ref_pool[slot]) < STATE_TOL[torch.float32]
    for row in set(range(pool.shape[0])) - {2, 6}:           # includes the extra last row
        assert torch.equal(pool[row], batch.pool[row]), f"row {row} was written"


def test_zeroed_slot_is_a_fresh_request():
    batch = make_batch((90,), [4], seed=3)
    batch.pool[4].zero_()
    o, _, _, pool = run_extend(batch)
    tr_o, tr_final = transformers_reference(batch)
    assert rel(o[0], tr_o) < OUT_TOL
    assert rel(pool[4], tr_final[4]) < STATE_TOL[torch.float32]


def test_plan_from_device_boundaries_equals_host_plan():
    batch = make_batch((70, 5, 129), [1, 2, 3], seed=4)
    o_host, _, _, pool_host = run_extend(batch, host=True)
    o_dev, _, _, pool_dev = run_extend(batch, host=False)
    assert torch.equal(o_host, o_dev) and torch.equal(pool_host, pool_dev)
    # host lengths that do not describe this call (another sequence count) are not used
    kernel = QLAGDNKernel()
    kernel.host_seqlens = [204]
    q, k, v = batch.qkv()
    g, beta = batch.gates()
    pool = batch.pool.clone()
    o, _, _ = kernel.extend(q, k, v, g, beta, ssm_states=pool, cache_indices=torch.tensor([1, 2, 3]),
                            query_start_loc=batch.cu)
    assert torch.equal(o, o_host) and torch.equal(pool, pool_host)


def test_plan_is_reused_across_layers():
    batch = make_batch((70, 5), [1, 2], seed=5)
    kernel = QLAGDNKernel()
    run_extend(batch, kernel)
    first = kernel._plan
    run_extend(batch, kernel)
    assert kernel._plan is first


def test_first_extend_asks_to_preload_kernels_once(monkeypatch, caplog):
    """The first extend (SGLang's start-up warm-up request) asks qla-serve to load the adapter's
    kernels, with the heads and pool dtype of the call; later extends (every layer of every step)
    do not ask again."""
    import logging

    from qla_serve import warmup

    monkeypatch.setattr(warmup, "_preloaded", set())
    asked = []
    real = warmup.preload
    monkeypatch.setattr("qla_serve.integrations.sglang.kernel.preload",
                        lambda *a, **k: asked.append((a, k["engine"])) or real(*a, **k))
    batch = make_batch((70, 5), [1, 2], pool_dtype=torch.bfloat16, seed=8)
    kernel = QLAGDNKernel()
    with caplog.at_level(logging.INFO, logger="qla_serve.sglang"):
        run_extend(batch, kernel)
        run_extend(batch, kernel)
    assert [(a[1:], e) for a, e in asked] == [((2, 4, torch.bfloat16), "sglang")]
    said = [r.getMessage() for r in caplog.records if "preloaded" in r.getMessage()]
    assert said == ["qla-serve: no kernels preloaded (no qla-serve kernel for cpu devices)"]


def test_writes_into_the_given_output_buffer():
    batch = make_batch((70, 5), [1, 2], seed=6)
    out = torch.full((1, 75, 4, 128), float("nan"), dtype=torch.bfloat16)
    o, _, _, _ = run_extend(batch, output=out)
    assert o.data_ptr() == out.data_ptr() and torch.isfinite(out).all()


def test_trailing_tokens_past_the_last_sequence_get_zero_output():
    batch = make_batch((70, 5), [1, 2], seed=7)
    kernel = QLAGDNKernel()
    q, k, v = batch.qkv()
    g, beta = batch.gates()
    pool = batch.pool.clone()
    cu = torch.tensor([0, 60, 65], dtype=torch.int32)          # 10 tokens past the last sequence
    o, _, _ = kernel.extend(q, k, v, g, beta, ssm_states=pool, cache_indices=torch.tensor([1, 2]),
                            query_start_loc=cu)
    assert o.shape[1] == 75 and torch.count_nonzero(o[0, 65:]) == 0
    assert torch.isfinite(o).all()


def test_track_state_snapshot_is_the_state_at_the_chunk_boundary():
    """extra_buffer radix cache: SGLang asks for the fp32 state after ``track_chunk_idx * 64`` tokens."""
    batch = make_batch((150, 70, 20), [3, 5, 6], seed=8)
    track = torch.full((3, 4, 128, 128), 7.0)
    idx = torch.tensor([2, -1, 0], dtype=torch.int32)
    o, _, h, pool = run_extend(batch, track_state=track, track_chunk_idx=idx)
    assert h is None
    plain_o, _, _, plain_pool = run_extend(batch)
    assert torch.equal(o, plain_o) and torch.equal(pool, plain_pool)

    # the state after the first 128 tokens of sequence 0 = the final state of a 128-token extend
    head = make_batch((128,), [3], seed=8)
    head.mixed_qkv, head.a, head.b, head.pool = batch.mixed_qkv[:128], batch.a[:128], batch.b[:128], batch.pool
    _, _, _, head_pool = run_extend(head)
    assert rel(track[0], head_pool[3]) < 1e-5
    assert torch.equal(track[1], torch.full_like(track[1], 7.0)), "untracked row must be left alone"
    assert torch.equal(track[2], batch.pool[6].float()), "chunk 0 is the initial state"


def test_refuses_what_it_cannot_do():
    batch = make_batch((10,), [1], seed=9)
    with pytest.raises(NotImplementedError, match="inplace_update"):
        run_extend(batch, inplace_update=False)
    with pytest.raises(NotImplementedError, match="decode"):
        QLAGDNKernel().decode()
    with pytest.raises(NotImplementedError, match="target_verify"):
        QLAGDNKernel().target_verify()
