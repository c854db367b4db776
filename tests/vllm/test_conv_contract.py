"""qla_serve.gdn_conv against vLLM's own causal conv (its CPU build's torch form): same outputs and
the same conv-state convention (row s = the input W−1−s tokens back, oldest first), so the vLLM
adapter can hand qla-serve vLLM's conv state. The GPU kernel is pinned to the same definition in
tests/test_conv.py (and against vLLM's Triton conv where vLLM's CUDA build is installed)."""
from __future__ import annotations

import torch

import qla_serve


def test_gdn_conv_matches_vllms_conv_and_state_update():
    from vllm.model_executor.layers.mamba.ops.cpu.causal_conv1d import causal_conv1d_fn_cpu

    gen = torch.Generator().manual_seed(7)
    H, HV, K, W = 1, 2, 128, 4
    C = 2 * H * K + HV * K
    seqlens = [1, 2, 3, 9, 70]
    cu = torch.tensor([0] + torch.tensor(seqlens).cumsum(0).tolist(), dtype=torch.int32)
    T, N = int(cu[-1]), len(seqlens)
    x = torch.randn(T, C, generator=gen)
    weight = 0.5 * torch.randn(C, W, generator=gen)
    bias = 0.1 * torch.randn(C, generator=gen)
    state = torch.randn(N + 2, W - 1, C, generator=gen)           # "sd": [slots, W-1, C]
    idx = torch.arange(1, N + 1, dtype=torch.int32)
    hinit = torch.tensor([True, False, True, True, False])
    theirs_state = state.transpose(1, 2).clone()                  # vLLM's kernel takes [slots, C, W-1]
    theirs = causal_conv1d_fn_cpu(x=x.T.contiguous(), weight=weight, bias=bias, conv_states=theirs_state,
                                  query_start_loc=cu, cache_indices=idx, has_initial_state=hinit,
                                  activation="silu").T
    mine = qla_serve.gdn_conv(x, weight=weight, bias=bias, conv_state=state, state_indices=idx, cu_seqlens=cu,
                              num_k_heads=H, has_initial_state=hinit, l2norm_qk=False)
    assert torch.allclose(mine, theirs, rtol=1e-5, atol=1e-5), (mine - theirs).abs().max()
    assert torch.allclose(state, theirs_state.transpose(1, 2), rtol=0, atol=0)


def test_adapter_keeps_vllms_conv_where_gdn_conv_cannot_take_the_state():
    """The vLLM adapter asks before it hands vLLM's conv state to gdn_conv: a state widened for
    speculative decoding, or rows that are not the layer's channels, keep vLLM's conv (a reason,
    logged once by the adapter), never an error in the step."""
    from types import SimpleNamespace

    from qla_serve.integrations.vllm import engine_ops
    from vllm.model_executor.layers.mamba.mamba_utils import is_conv_state_dim_first

    C, W = 512, 4
    x = torch.randn(8, C).bfloat16()

    def layer(rows):
        shape = (3, C, rows) if is_conv_state_dim_first() else (3, rows, C)
        return SimpleNamespace(conv1d=SimpleNamespace(weight=torch.randn(C, 1, W).bfloat16(), bias=None),
                               kv_cache=(torch.zeros(shape, dtype=torch.bfloat16), None), activation="silu",
                               head_k_dim=128, num_k_heads=1, tp_size=1)

    assert "rows" in engine_ops._ask_conv_kernel(layer(W - 1 + 2), x, layer(W - 1 + 2).kv_cache[0])
    narrow = layer(W - 1)
    assert "channels" in engine_ops._ask_conv_kernel(narrow, x[:, :256], narrow.kv_cache[0])
    # a well-formed state reaches the kernel's own checks (on this CPU machine: no CUDA device)
    assert "CUDA" in engine_ops._ask_conv_kernel(narrow, x, narrow.kv_cache[0])
