"""Where one vLLM GDN layer's prefill core spends its time when qla-serve runs it: host and GPU, per
piece, and what a step's first GDN layer (nothing queued ahead of it on the GPU) pays against the
others.

The core is the vLLM adapter's own sequence (``integrations/vllm/layer.py``'s ``qla_core``) on a
stand-in layer with real shapes: the causal conv over ``mixed_qkv`` → the q/k/v views and the raw
gate inputs → ``qla_serve.gdn_prefill`` on a bf16 state pool (the gates computed in its l2norm
pass). Each row runs with
each conv (``--convs``): ``qla`` = ``qla_serve.gdn_conv`` (q/k normalised in the conv kernel),
``vllm`` = vLLM's Triton conv, then the op's l2norm pass (the adapter's ``QLA_VLLM_CONV``).
Per row (head config × batch × conv):

  plan_us, prepared_plan_us   host µs of ``plan_prefill`` (what the metadata builder runs once per
                              step) without and with the kernels' own tables (``num_v_heads``)
  host_us {conv, inputs, prefill, core} (inputs: the views and gate arguments; prefill: the op
                              with the gates)
                              host µs to enqueue each piece (best of 7 repeats of N calls, the GPU
                              kept busy ahead of them so no launch waits)
  gpu_us {conv, inputs, prefill, core}
                              GPU µs of each piece (CUDA events, queued behind a busy GPU: no host
                              gaps)
  idle_core_us {fresh_plan, prepared_plan}
                              events around the whole core started on an idle GPU (median of 15),
                              on a plan as it comes from the builder without / with its tables: what
                              a step's first GDN layer reads in the serving benchmark's trace

    python bench_serving/layer_profile.py --out DIR [--heads 16/32,2/8] [--mixes ...] [--convs qla,vllm]

Needs vLLM (the ``.gpu-vllm-s`` bundle) and an sm_90 GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from types import SimpleNamespace

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_bench import versions  # noqa: E402

from qla_serve import gdn_prefill, plan_prefill  # noqa: E402

K = V = 128
WIDTH = 4
# vLLM's chunked prefill puts decodes first: "16x1+" rows are a mixed step's decodes riding along.
MIXES = {
    "1x8192": [8192],
    "7000+600+300+200+92": [7000, 600, 300, 200, 92],
    "16x1+2x4096": [1] * 16 + [4096, 4096],
    "16x1+1x1024": [1] * 16 + [1024],
    "4x1+1x256": [1] * 4 + [256],
}
SLEEP_CYCLES = 50_000_000       # ≈ 25 ms of GPU time ahead of a timed batch: no launch waits


def stand_in_layer(H: int, HV: int, slots: int, dev: torch.device):
    """The attributes of vLLM's GDN layer that the adapter's pieces read, with real shapes."""
    from vllm.model_executor.layers.mamba.mamba_utils import is_conv_state_dim_first

    conv_dim = 2 * H * K + HV * V
    conv_state = torch.randn(slots, conv_dim, WIDTH - 1, device=dev).bfloat16()
    if not is_conv_state_dim_first():
        conv_state = conv_state.transpose(1, 2).contiguous()
    ssm = (0.1 * torch.randn(slots, HV, V, K, device=dev)).bfloat16()
    weight = (0.3 * torch.randn(conv_dim, 1, WIDTH, device=dev)).bfloat16()
    return SimpleNamespace(
        conv1d=SimpleNamespace(weight=weight, bias=None), activation="silu", kv_cache=(conv_state, ssm),
        num_k_heads=H, num_v_heads=HV, tp_size=1, head_k_dim=K, head_v_dim=V,
        A_log=(torch.rand(HV, device=dev) * 2 - 1).float(), dt_bias=torch.randn(HV, device=dev).bfloat16())


def best_host_us(fn, n: int) -> float:
    """Host µs per call; the GPU is kept busy ahead of each batch so no launch blocks."""
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(7):
        torch.cuda._sleep(SLEEP_CYCLES)
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
    return round(best, 1)


def event_us(fn, busy_cycles: int, before=lambda: None, reps: int = 15) -> float:
    """CUDA-event µs around one call (median of ``reps``). With ``busy_cycles`` the call is queued
    behind a GPU kept busy that long (no host gaps: its GPU time); with 0 it starts on an idle GPU
    (what a step's first GDN layer meets). ``before`` runs untimed ahead of each call."""
    got = []
    for _ in range(reps):
        before()
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if busy_cycles:
            torch.cuda._sleep(busy_cycles)
        e0.record()
        fn()
        e1.record()
        torch.cuda.synchronize()
        got.append(e0.elapsed_time(e1) * 1e3)
    return round(statistics.median(got), 1)


def gpu_us(fn) -> float:
    return event_us(fn, SLEEP_CYCLES // 10)


def idle_us(fn, before=lambda: None) -> float:
    return event_us(fn, 0, before)


def row(H: int, HV: int, seqlens: list[int], n: int, conv_choice: str) -> dict:
    from qla_serve.integrations.vllm import engine_ops
    from qla_serve.integrations.vllm.layer import qla_core

    os.environ["QLA_VLLM_CONV"] = conv_choice
    dev = torch.device("cuda", torch.cuda.current_device())
    T, N = sum(seqlens), len(seqlens)
    layer = stand_in_layer(H, HV, N + 1, dev)
    mixed_qkv = torch.randn(T, 2 * H * K + HV * V, device=dev).bfloat16()
    a = torch.randn(T, HV, device=dev).bfloat16()
    b = torch.randn(T, HV, device=dev).bfloat16()
    out = torch.empty(T, HV, V, device=dev, dtype=torch.bfloat16)
    cu_cpu = torch.tensor([0] + torch.tensor(seqlens).cumsum(0).tolist(), dtype=torch.int32)
    idx = torch.arange(1, N + 1, dtype=torch.int32, device=dev)
    hinit = torch.ones(N, dtype=torch.bool, device=dev)
    pool, layout = engine_ops.state_pool(layer)
    conv_md = engine_ops.conv_metadata(cu_cpu, dev)
    holder = {"plan": plan_prefill(cu_cpu, device=dev)}

    def conv():
        plan = holder["plan"]
        return engine_ops.conv_prefill(layer, mixed_qkv, plan.cu_seqlens, idx, hinit, conv_md, plan)

    conv_out, normalised = conv()
    if normalised != (conv_choice == "qla"):
        raise RuntimeError(f"asked for the {conv_choice} conv, the adapter ran the other one")

    def inputs():
        return engine_ops.prefill_inputs(layer, conv_out, a, b, normalised)

    q, k, v, gates, l2 = inputs()

    def prefill():
        plan = holder["plan"]
        gdn_prefill(q, k, v, **gates, state_pool=pool, state_indices=idx, cu_seqlens=plan.cu_seqlens,
                    has_initial_state=hinit, plan=plan, scale=K ** -0.5, use_qk_l2norm=l2, out=out,
                    state_layout=layout, null_slot=0)

    def core():
        plan = holder["plan"]
        qla_core(layer, mixed_qkv, b, a, out, plan.cu_seqlens, idx, hinit, conv_md, plan)

    prefill()                                       # kernels loaded, the plan's tables cached
    res = {"heads": f"{H}/{HV}", "conv": conv_choice, "seqlens": seqlens, "tokens": T}
    res["plan_us"] = best_host_us(lambda: plan_prefill(cu_cpu, device=dev), n)
    res["prepared_plan_us"] = best_host_us(lambda: plan_prefill(cu_cpu, device=dev, num_v_heads=HV, head_v_dim=V), n)
    pieces = {"conv": conv, "inputs": inputs, "prefill": prefill, "core": core}
    res["host_us"] = {name: best_host_us(fn, n) for name, fn in pieces.items()}
    res["gpu_us"] = {name: gpu_us(fn) for name, fn in pieces.items()}

    def fresh():
        holder["plan"] = plan_prefill(cu_cpu, device=dev)

    def prepared():
        holder["plan"] = plan_prefill(cu_cpu, device=dev, num_v_heads=HV, head_v_dim=V)

    res["idle_core_us"] = {"fresh_plan": idle_us(core, fresh), "prepared_plan": idle_us(core, prepared)}
    cp_key = next((key for key in holder["plan"].kernel_data if key[0] == "hopper-cp"), None)
    tables = holder["plan"].kernel_data.get(cp_key) if cp_key else None
    res["cp_parts"] = list(tables.parts) if tables is not None else None
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heads", default="16/32,2/8")
    ap.add_argument("--mixes", default=",".join(MIXES))
    ap.add_argument("--convs", default="qla,vllm")
    ap.add_argument("--calls", type=int, default=30, help="calls per timed host repeat")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if not (torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)):
        print("layer_profile: needs an sm_90 GPU", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for hv in args.heads.split(","):
        H, HV = (int(x) for x in hv.split("/"))
        for mix in args.mixes.split(","):
            for conv in args.convs.split(","):
                r = {"mix": mix, **row(H, HV, MIXES[mix], args.calls, conv)}
                rows.append(r)
                print(json.dumps(r), flush=True)
    doc = {"gpu": torch.cuda.get_device_name(), "versions": versions(), "command": " ".join(sys.argv), "rows": rows}
    with open(os.path.join(args.out, "layer_profile.json"), "w") as f:
        json.dump(doc, f, indent=1)
    lines = ["| heads | mix | conv | plan µs (prepared) | host µs conv / inputs / prefill / core | "
             "GPU µs conv / inputs / prefill / core | idle-GPU core µs, fresh plan / prepared | CP |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        h, gp = r["host_us"], r["gpu_us"]
        lines.append(f"| {r['heads']} | {r['mix']} | {r['conv']} | {r['plan_us']} ({r['prepared_plan_us']}) | "
                     f"{h['conv']} / {h['inputs']} / {h['prefill']} / {h['core']} | "
                     f"{gp['conv']} / {gp['inputs']} / {gp['prefill']} / {gp['core']} | "
                     f"{r['idle_core_us']['fresh_plan']} / {r['idle_core_us']['prepared_plan']} | {r['cp_parts']} |")
    with open(os.path.join(args.out, "layer_profile.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
