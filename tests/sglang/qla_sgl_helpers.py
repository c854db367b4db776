"""SGLang-shaped GDN extend inputs and the two references they are checked against.

Inputs look like what ``GDNAttnBackend.forward_extend`` hands ``extend``: q/k/v are strided views
of one packed ``mixed_qkv`` buffer ``[1, T, heads, dim]``, g/beta come from the gating
``[1, T, HV]`` fp32, the pool is ``[slots+1, HV, V, K]`` and padding sequences carry index -1.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import torch
from sglang.srt.model_executor.forward_batch_info import ForwardMode
from sglang.test.kits.attention_unittest.attention_methods import gdn_attention as kit
from transformers.models.qwen3_next.modeling_qwen3_next import torch_chunk_gated_delta_rule

K = V = 128


@dataclass
class Batch:
    lens: tuple[int, ...]
    slots: list[int]            # pool row per sequence, -1 = padding
    module: kit.ReferenceGDNAttention
    mixed_qkv: torch.Tensor     # [T, qkv_dim]
    a: torch.Tensor             # [T, HV]
    b: torch.Tensor
    pool: torch.Tensor          # [slots+1, HV, V, K], the state before the call

    @property
    def cu(self) -> torch.Tensor:
        return torch.tensor([0, *torch.tensor(self.lens).cumsum(0).tolist()], dtype=torch.int32)

    def qkv(self, device="cpu"):
        """Strided q, k ``[1, T, H, K]`` and v ``[1, T, HV, V]`` views of the packed buffer."""
        return self.module.split_qkv(self.mixed_qkv.to(device))

    def gates(self, device="cpu"):
        g, beta = kit._pure_torch_gdn_gating(self.module, self.a, self.b)
        return g.unsqueeze(0).to(device), beta.unsqueeze(0).to(device)


def make_batch(lens, slots, *, H=2, HV=4, num_slots=8, pool_dtype=torch.float32, seed=0) -> Batch:
    gen = torch.Generator().manual_seed(seed)
    module = kit.ReferenceGDNAttention(num_k_heads=H, num_v_heads=HV, head_k_dim=K, head_v_dim=V,
                                       dtype=torch.bfloat16, device="cpu")
    with torch.no_grad():
        module.A_log.copy_(torch.rand(HV, generator=gen) * 2 - 1)
        module.dt_bias.copy_(torch.randn(HV, generator=gen))
    T = sum(lens)
    mixed = torch.randn(T, module.mixed_qkv_dim, generator=gen).to(torch.bfloat16)
    a = torch.randn(T, HV, generator=gen).to(torch.bfloat16)
    b = torch.randn(T, HV, generator=gen).to(torch.bfloat16)
    pool = (torch.randn(num_slots + 1, HV, V, K, generator=gen) * 0.1).to(pool_dtype)
    return Batch(tuple(lens), list(slots), module, mixed, a, b, pool)


def sglang_reference(batch: Batch):
    """SGLang's own pure-torch GDN reference (token loop, fp32): (out [1,T,HV,V], final pool).

    It has no notion of padding (index -1 would read the pool's last row), so padding sequences
    are excluded by the caller's comparison.
    """
    H, HV = batch.module.num_k_heads, batch.module.num_v_heads
    case = kit.GDNAttentionCase(name="qla", backend="qla", forward_mode=ForwardMode.EXTEND,
                                num_k_heads=H, num_v_heads=HV, page_size=1,
                                prefix_lens=(0,) * len(batch.lens), extend_lens=batch.lens)
    idx = torch.tensor(batch.slots)
    fixture = SimpleNamespace(
        case=case, reference_module=batch.module, mixed_qkv=batch.mixed_qkv, a=batch.a, b=batch.b,
        runner=SimpleNamespace(device="cpu",
                               req_to_token_pool=SimpleNamespace(get_mamba_indices=lambda _: idx)),
        forward_batch=SimpleNamespace(req_pool_indices=None),
    )
    ref = kit._pure_torch_gdn_reference(fixture, batch.pool.clone())
    return ref.output, ref.final_states


def transformers_reference(batch: Batch):
    """transformers' ``torch_chunk_gated_delta_rule`` per sequence: (out [T,HV,V] fp32, {slot: state [HV,V,K]})."""
    q, k, v = batch.qkv()
    g, beta = batch.gates()
    rep = batch.module.num_v_heads // batch.module.num_k_heads
    outs, finals = [], {}
    cu = batch.cu.tolist()
    for i, slot in enumerate(batch.slots):
        s, e = cu[i], cu[i + 1]
        if slot < 0 or e == s:
            outs.append(torch.zeros(e - s, *v.shape[2:]))
            continue
        h0 = batch.pool[slot].float().transpose(-1, -2).unsqueeze(0)   # [1, HV, K, V]
        o, st = torch_chunk_gated_delta_rule(
            q[:, s:e].repeat_interleave(rep, 2), k[:, s:e].repeat_interleave(rep, 2), v[:, s:e],
            g[:, s:e], beta[:, s:e], initial_state=h0, output_final_state=True,
            use_qk_l2norm_in_kernel=True)
        outs.append(o[0].float())
        finals[slot] = st[0].transpose(-1, -2)
    return torch.cat(outs), finals


def rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    x, ref = x.detach().double().cpu(), ref.detach().double().cpu()
    assert torch.isfinite(x).all()
    return float((x - ref).norm() / ref.norm().clamp_min(1e-30))
