"""GPU time of ``qla_serve.gdn_conv`` against what it replaces and against a memory floor, same run,
same inputs (no vLLM needed; ``layer_profile.py`` has vLLM's conv in the adapter's sequence).

Per row (head config × batch): gdn_conv (conv + silu + q/k l2norm, conv state in place), the op's
l2norm pass alone on views of the conv output (``kernels/hopper/qk_norm.py``: what gdn_conv saves
besides the conv), and ``copy_`` of the same ``[T, C]`` bf16 bytes (one read and one write of
them: the floor a conv's own traffic cannot beat). GPU µs, CUDA events, median of 25 calls.

    python bench_serving/conv_bench.py --out DIR [--heads 16/32,2/8]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from layer_profile import event_us  # noqa: E402

import qla_serve  # noqa: E402
from qla_serve import plan_prefill  # noqa: E402

K = V = 128
MIXES = {"1x8192": [8192], "16x1+2x4096": [1] * 16 + [4096, 4096], "16x1+1x1024": [1] * 16 + [1024],
         "4x1+1x256": [1] * 4 + [256]}


def gpu_us(fn) -> float:
    fn()                                        # loads (or compiles) the kernel outside the timing
    return event_us(fn, 2_000_000, reps=25)     # queued behind a busy GPU: no host gaps inside


def row(H: int, HV: int, seqlens: list[int]) -> dict:
    from qla_serve.kernels import hopper

    dev = torch.device("cuda", torch.cuda.current_device())
    T, N = sum(seqlens), len(seqlens)
    C = 2 * H * K + HV * V
    x = torch.randn(T, C, device=dev).bfloat16()
    weight = (0.5 * torch.randn(C, 1, 4, device=dev)).bfloat16()
    state = torch.randn(N + 1, 3, C, device=dev).bfloat16()
    idx = torch.arange(1, N + 1, dtype=torch.int32, device=dev)
    hinit = torch.ones(N, dtype=torch.bool, device=dev)
    cu = torch.tensor([0] + torch.tensor(seqlens).cumsum(0).tolist(), dtype=torch.int32)
    plan = plan_prefill(cu, device=dev)
    out = torch.empty_like(x)

    def conv():
        qla_serve.gdn_conv(x, weight=weight, conv_state=state, state_indices=idx, cu_seqlens=plan.cu_seqlens,
                           plan=plan, num_k_heads=H, has_initial_state=hinit, null_slot=0, out=out)

    norm = hopper.qk_norm_kernel(H, K, "bfloat16", (C, C))
    qn = torch.empty(T, H, K, device=dev, dtype=torch.bfloat16)
    kn = torch.empty_like(qn)
    q, k = x[:, :H * K].unflatten(1, (H, K)), x[:, H * K:2 * H * K].unflatten(1, (H, K))
    res = {"heads": f"{H}/{HV}", "tokens": T, "seqlens": seqlens}
    res["gdn_conv_us"] = gpu_us(conv)
    res["l2norm_pass_us"] = gpu_us(lambda: norm(q, k, qn, kn))
    res["copy_floor_us"] = gpu_us(lambda: out.copy_(x))
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heads", default="16/32,2/8")
    ap.add_argument("--mixes", default=",".join(MIXES))
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if not (torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)):
        print("conv_bench: needs an sm_90 GPU", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for hv in args.heads.split(","):
        H, HV = (int(x) for x in hv.split("/"))
        for mix in args.mixes.split(","):
            r = {"mix": mix, **row(H, HV, MIXES[mix])}
            rows.append(r)
            print(json.dumps(r), flush=True)
    with open(os.path.join(args.out, "conv_bench.json"), "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "command": " ".join(sys.argv),
                   "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
