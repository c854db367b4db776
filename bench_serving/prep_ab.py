"""What the vLLM adapter's inputs cost around the prefill: vLLM's prep against qla-serve's pass.

Both paths start from what vLLM's causal conv hands the layer (``conv_out [T, 2·H·K + HV·V]``
bf16, gate inputs ``a``, ``b`` ``[T, HV]`` bf16) and end with the output and the pool updated:

* ``vllm-prep``: vLLM's ``fused_post_conv_prep`` (l2-normalises q/k and copies q, k, v into
  contiguous tensors, computes g, β) → ``gdn_prefill`` on the copies;
* ``qla-pass``: ``qla_serve.gdn_gating`` → ``gdn_prefill`` on views of ``conv_out`` with
  ``use_qk_l2norm=True`` (its own q/k normalising pass; v is read in place).

Same inputs, same run: per row it prints GPU-busy time (torch profiler, no host gaps) and wall
time (do_bench) of each path and of the preps alone, and checks that both paths give the same
output and final states (relative L2 between them). Needs vLLM (the ``.gpu-vllm-s`` bundle).

    python bench_serving/prep_ab.py --out DIR [--heads 16/32,2/8]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_bench import bench, gpu_ms, versions  # noqa: E402

import qla_serve  # noqa: E402
from qla_serve import gdn_gating, gdn_prefill, plan_prefill  # noqa: E402

K = V = 128
MIXES = {
    "1x8192": [8192],
    "1x2048": [2048],
    "2x4096+16x1": [1] * 16 + [4096, 4096],       # a mixed-c16-like step: decodes first, then prefills
    "7000+600+300+200+92": [7000, 600, 300, 200, 92],
    "1x16384": [16384],
}


def rel(x, ref) -> float:
    x, ref = x.double(), ref.double()
    return float((x - ref).norm() / ref.norm().clamp_min(1e-30))


def row(H: int, HV: int, seqlens: list[int], seed: int = 0) -> dict:
    from vllm.third_party.flash_linear_attention.ops import fused_post_conv_prep

    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(seed)
    T, N = sum(seqlens), len(seqlens)
    conv_out = torch.randn(T, 2 * H * K + HV * V, device=dev, generator=gen).bfloat16()
    a = torch.randn(T, HV, device=dev, generator=gen).bfloat16()
    b = torch.randn(T, HV, device=dev, generator=gen).bfloat16()
    A_log = (torch.rand(HV, device=dev, generator=gen) * 2 - 1).float()
    dt_bias = torch.randn(HV, device=dev, generator=gen).bfloat16()
    pool0 = (0.1 * torch.randn(N + 1, HV, V, K, device=dev, generator=gen)).bfloat16()
    idx = torch.arange(1, N + 1, dtype=torch.int32, device=dev)
    hinit = torch.ones(N, dtype=torch.bool, device=dev)
    cu_cpu = torch.tensor([0] + torch.tensor(seqlens).cumsum(0).tolist(), dtype=torch.int32)
    plan = plan_prefill(cu_cpu, device=dev)
    cu = plan.cu_seqlens
    pools = {name: pool0.clone() for name in ("vllm-prep", "qla-pass")}
    outs = {name: torch.empty(T, HV, V, dtype=torch.bfloat16, device=dev) for name in pools}

    def vllm_prep():
        return fused_post_conv_prep(conv_output=conv_out, a=a, b=b, A_log=A_log, dt_bias=dt_bias, num_k_heads=H,
                                    head_k_dim=K, head_v_dim=V, apply_l2norm=True, output_g_exp=False)

    def qla_views():
        g, beta = gdn_gating(a, b, A_log, dt_bias)
        q = conv_out[:, :H * K].unflatten(1, (H, K))
        k = conv_out[:, H * K:2 * H * K].unflatten(1, (H, K))
        v = conv_out[:, 2 * H * K:].unflatten(1, (HV, V))
        return q, k, v, g, beta

    def path(name):
        if name == "vllm-prep":
            q, k, v, g, beta = vllm_prep()
            l2 = False
        else:
            q, k, v, g, beta = qla_views()
            l2 = True
        gdn_prefill(q, k, v, g, beta, state_pool=pools[name], state_indices=idx, cu_seqlens=cu,
                    has_initial_state=hinit, plan=plan, use_qk_l2norm=l2, out=outs[name])

    # Agreement: one call each from the same pool
    for name in pools:
        path(name)
    torch.cuda.synchronize()
    out = {"heads": f"{H}/{HV}", "seqlens": seqlens, "tokens": T,
           "o_rel_diff": rel(outs["qla-pass"], outs["vllm-prep"]),
           "state_rel_diff": rel(pools["qla-pass"][1:], pools["vllm-prep"][1:])}
    for name in pools:
        out[f"{name}_gpu_ms"] = gpu_ms(lambda: path(name))
        out[f"{name}_ms"] = bench(lambda: path(name))
    out["prep_gpu_ms"] = gpu_ms(vllm_prep)
    out["gating_gpu_ms"] = gpu_ms(lambda: gdn_gating(a, b, A_log, dt_bias))
    out["ratio_gpu"] = out["qla-pass_gpu_ms"] / out["vllm-prep_gpu_ms"]
    out["ratio_wall"] = out["qla-pass_ms"] / out["vllm-prep_ms"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--heads", default="16/32,2/8")
    ap.add_argument("--mixes", default=",".join(MIXES))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for hv in args.heads.split(","):
        H, HV = (int(x) for x in hv.split("/"))
        for mix in args.mixes.split(","):
            r = row(H, HV, MIXES[mix])
            r["mix"] = mix
            rows.append(r)
            print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()
                              if k != "seqlens"}), flush=True)
    result = {"gpu": torch.cuda.get_device_name(), "versions": versions(), "python": platform.python_version(),
              "command": " ".join(sys.argv), "qla_serve": qla_serve.__version__, "rows": rows}
    with open(os.path.join(args.out, "prep_ab.json"), "w") as f:
        json.dump(result, f, indent=1)
    lines = ["| heads | mix | vLLM prep + qla (GPU ms) | gating + qla pass (GPU ms) | ratio GPU | ratio wall | "
             "prep alone | gating alone | o diff | state diff |", "|" + "---|" * 10]
    for r in rows:
        lines.append(f"| {r['heads']} | {r['mix']} | {r['vllm-prep_gpu_ms']:.3f} | {r['qla-pass_gpu_ms']:.3f} | "
                     f"{r['ratio_gpu']:.2f} | {r['ratio_wall']:.2f} | {r['prep_gpu_ms']:.3f} | "
                     f"{r['gating_gpu_ms']:.4f} | {r['o_rel_diff']:.1e} | {r['state_rel_diff']:.1e} |")
    with open(os.path.join(args.out, "prep_ab.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
