"""SGLang's own ``GDNAttnBackend.forward_extend`` (the real method, through the plugin's hook)
driving the qla kernel: the exact keyword arguments SGLang passes, the host extend lengths the hook
lends, and the extra_buffer track snapshot landing in the pool row SGLang picked.

The causal conv and the gating are CUDA/Triton kernels in SGLang; here they are replaced by an
identity conv and the kit's pure-torch gating so the rest of forward_extend runs on CPU as shipped.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from qla_sgl_helpers import make_batch, rel, sglang_reference
from qla_serve.integrations.sglang import hooks
from qla_serve.integrations.sglang.kernel import QLAGDNKernel

pytestmark = pytest.mark.sglang

gdn = pytest.importorskip("sglang.srt.layers.attention.linear.gdn_backend")


@pytest.fixture(autouse=True)
def cpu_conv_and_gates(monkeypatch):
    from sglang.srt.plugins import load_plugins
    from sglang.test.kits.attention_unittest.attention_methods import gdn_attention as kit

    load_plugins()
    assert hooks.missing_hooks() == []

    def identity_conv(x, *args, **kwargs):
        return x

    def gates(A_log, a, b, dt_bias):
        g, beta = kit._pure_torch_gdn_gating(SimpleNamespace(A_log=A_log, dt_bias=dt_bias), a, b)
        return g.unsqueeze(0), beta.unsqueeze(0)

    monkeypatch.setattr(gdn, "causal_conv1d_fn", identity_conv)
    monkeypatch.setattr(gdn, "fused_gdn_gating", gates)


def backend_for(batch, kernel, metadata):
    """A GDNAttnBackend without a model runner: just the state its forward_extend reads."""
    backend = object.__new__(gdn.GDNAttnBackend)
    HV = batch.module.num_v_heads
    conv = torch.zeros(batch.pool.shape[0], batch.module.mixed_qkv_dim, 3, dtype=torch.bfloat16)
    ssm = batch.pool.clone()
    cache = SimpleNamespace(conv=[conv], temporal=ssm)
    backend.req_to_token_pool = SimpleNamespace(mamba2_layer_cache=lambda layer_id: cache)
    backend.kernel_dispatcher = SimpleNamespace(extend=kernel.extend, extend_kernel=kernel)
    backend.mis_metadata = None
    backend.forward_metadata = SimpleNamespace(**{
        **dict(query_start_loc=batch.cu, mamba_cache_indices=torch.tensor(batch.slots, dtype=torch.int32),
               retrieve_next_token=None, retrieve_next_sibling=None, retrieve_parent_token=None,
               state_checkpoint_cu_starts=None, num_state_checkpoints=0, state_checkpoint_every_n_tokens=0,
               conv_block_table=None, track_chunk_idx=None, has_mamba_track_mask=False),
        **metadata})
    m = batch.module
    layer = SimpleNamespace(
        layer_id=0, conv_weights=None, bias=None, activation="silu",
        q_dim=m.num_k_heads * 128, k_dim=m.num_k_heads * 128, v_dim=HV * 128,
        num_q_heads=m.num_k_heads, num_k_heads=m.num_k_heads, num_v_heads=HV,
        head_q_dim=128, head_k_dim=128, head_v_dim=128, A_log=m.A_log, dt_bias=m.dt_bias)
    forward_batch = SimpleNamespace(
        forward_mode=SimpleNamespace(is_target_verify=lambda: False),
        extend_seq_lens_cpu=list(batch.lens), extend_prefix_lens=torch.ones(len(batch.lens), dtype=torch.int32))
    return backend, layer, forward_batch, ssm


class Recording(QLAGDNKernel):
    def __init__(self):
        super().__init__()
        self.calls = []

    def extend(self, *args, **kwargs):
        self.calls.append((sorted(kwargs), self.host_seqlens))
        self.tracked = kwargs.get("track_state") is not None
        return super().extend(*args, **kwargs)


def test_forward_extend_runs_the_qla_kernel_with_host_lengths():
    batch = make_batch((70, 1, 130), [3, -1, 5], seed=21)
    kernel = Recording()
    backend, layer, fb, ssm = backend_for(batch, kernel, {})
    out = gdn.GDNAttnBackend.forward_extend(backend, layer, fb, batch.mixed_qkv, batch.a, batch.b)
    (kw, host), = kernel.calls
    assert not kernel.tracked
    assert host == [70, 1, 130] and kernel.host_seqlens is None
    assert {"ssm_states", "cache_indices", "query_start_loc", "output", "track_state"} <= set(kw)
    ref_o, ref_pool = sglang_reference(batch)
    assert rel(out[0, :70], ref_o[0, :70]) < 1e-2 and rel(out[0, 71:], ref_o[0, 71:]) < 1e-2
    assert torch.count_nonzero(out[0, 70]) == 0
    for slot in (3, 5):
        assert rel(ssm[slot], ref_pool[slot]) < 1e-4
    for row in (0, 1, 2, 4, 6, 7, 8):
        assert torch.equal(ssm[row], batch.pool[row])


def test_extra_buffer_track_snapshot_reaches_the_tracked_slot():
    """Sequence 0 (150 tokens) is tracked at 130 tokens: SGLang wants the state after chunk 2
    (128 tokens) copied into pool row 7, via the fp32 snapshot buffer it hands to extend()."""
    batch = make_batch((150, 70), [3, 5], seed=22)
    meta = dict(
        has_mamba_track_mask=True,
        track_conv_indices=torch.tensor([[127, 128, 129]]), conv_states_mask_indices=torch.tensor([7]),
        track_ssm_h_src=torch.tensor([2]), track_ssm_h_dst=torch.tensor([7]),
        track_ssm_h_batch_src=torch.tensor([0]), track_chunk_idx=torch.tensor([2, -1], dtype=torch.int32),
        track_ssm_recompute_dst=None, track_ssm_final_src=torch.tensor([], dtype=torch.long),
        track_ssm_final_dst=torch.tensor([], dtype=torch.long))
    kernel = Recording()
    backend, layer, fb, ssm = backend_for(batch, kernel, meta)
    gdn.GDNAttnBackend.forward_extend(backend, layer, fb, batch.mixed_qkv, batch.a, batch.b)
    assert kernel.tracked, "SGLang should hand a snapshot-capable extend kernel the fp32 track buffer"

    head = make_batch((128,), [3], seed=22)
    head.mixed_qkv, head.a, head.b, head.pool = batch.mixed_qkv[:128], batch.a[:128], batch.b[:128], batch.pool
    _, head_pool = sglang_reference(head)
    assert rel(ssm[7], head_pool[3]) < 1e-4
    _, ref_pool = sglang_reference(batch)
    for slot in (3, 5):
        assert rel(ssm[slot], ref_pool[slot]) < 1e-4
