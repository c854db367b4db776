"""``qla-serve`` command line: info, demo, warmup."""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys

import torch

from . import __version__, dispatch


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def collect_info() -> dict:
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    info = {
        "qla_serve": __version__,
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "compute_capability": "sm_%d%d" % torch.cuda.get_device_capability(device) if cuda else None,
        "versions": {d: _version(d) for d in ("torch", "tilelang", "vllm", "sglang", "flash-linear-attention",
                                              "fla-core", "flash-qla", "transformers")},
        "QLA_BACKEND": os.environ.get(dispatch.BACKEND_ENV, "auto"),
        "dispatch (K=V=128)": dispatch.explain(device),
    }
    return info


def _print_info(info: dict) -> None:
    print(f"qla-serve {info['qla_serve']}")
    cc = f" ({info['compute_capability']})" if info["compute_capability"] else ""
    print(f"device: {info['device']}{cc}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items() if v))
    print(f"{dispatch.BACKEND_ENV}={info['QLA_BACKEND']}")
    for op, row in info["dispatch (K=V=128)"].items():
        chosen = next((b for b, why in row.items() if why == "ok"), None)
        print(f"{op}: -> {chosen}")
        for backend, why in row.items():
            print(f"  {backend:<10} {why}")


def _heads(text: str) -> tuple[int, int]:
    try:
        h, hv = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"heads must look like H/HV (e.g. 16/32), got {text!r}") from None
    if h <= 0 or hv % h:
        raise argparse.ArgumentTypeError(f"heads {text}: HV must be a positive multiple of H")
    return h, hv


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    pool_dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.pool_dtype]
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    res = run_demo(requests=args.requests, max_len=args.max_len, budget=args.budget, heads=args.heads,
                   device=device, dtype=dtype, pool_dtype=pool_dtype, seed=args.seed)
    rows = [("backend", res["backend"]), ("device", res["device"]), ("heads H/HV", res["heads"]),
            ("requests", res["requests"]), ("prefill calls", res["steps"]), ("tokens", res["tokens"]),
            ("ms / call (p50)", f"{res['ms_per_step_p50']:.2f}"), ("ms total", f"{res['ms_total']:.1f}"),
            ("tokens / s", f"{res['tokens_per_s']:.0f}"),
            ("max rel err o vs fp64", f"{res['max_rel_err_o']:.2e}"),
            ("max rel err state vs fp64", f"{res['max_rel_err_state']:.2e}")]
    width = max(len(k) for k, _ in rows)
    print("\n| " + "metric".ljust(width) + " | value |\n|" + "-" * (width + 2) + "|-------|")
    for k, v in rows:
        print(f"| {k.ljust(width)} | {v} |")
    tol = 2e-2 if dtype != torch.float32 or pool_dtype != torch.float32 else 1e-4
    ok = res["max_rel_err_o"] < tol and res["max_rel_err_state"] < tol
    print(f"\ncheck vs fp64 oracle (tolerance {tol:g}): {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def _cmd_warmup(args: argparse.Namespace) -> int:
    from .warmup import variants_for, warmup

    heads = list(args.heads or [])
    if args.config:
        with open(args.config) as f:
            heads += variants_for(json.load(f), tp_sizes=args.tp)
    if not heads:
        print("warmup: give --heads H/HV or --config config.json", file=sys.stderr)
        return 2
    return warmup(sorted(set(heads)), pool_dtypes=args.pool_dtype, compile_only=args.compile_only,
                  engine=args.engine, processes=args.processes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="qla-serve", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_info = sub.add_parser("info", help="device, versions, and which backend each op dispatches to and why")
    p_info.add_argument("--json", action="store_true")
    p_demo = sub.add_parser("demo", help="random chunked-prefill traffic through gdn_prefill, checked vs fp64")
    p_demo.add_argument("--requests", type=int, default=24)
    p_demo.add_argument("--max-len", type=int, default=700)
    p_demo.add_argument("--budget", type=int, default=512, help="tokens per prefill call")
    p_demo.add_argument("--heads", type=_heads, default=(2, 4), help="H/HV, e.g. 16/32 (default 2/4)")
    p_demo.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    p_demo.add_argument("--pool-dtype", choices=("bf16", "fp32"), default="fp32")
    p_demo.add_argument("--device", default=None)
    p_demo.add_argument("--seed", type=int, default=0)
    p_warm = sub.add_parser("warmup", help="compile every kernel variant a model needs into TileLang's cache")
    p_warm.add_argument("--heads", type=_heads, action="append", help="H/HV per rank; repeatable")
    p_warm.add_argument("--config", help="a Hugging Face config.json (Qwen3-Next / Qwen3.5)")
    p_warm.add_argument("--tp", type=int, action="append", default=None, help="tensor-parallel sizes (default 1)")
    p_warm.add_argument("--pool-dtype", choices=("fp32", "bf16"), action="append", default=None)
    p_warm.add_argument("--compile-only", action="store_true", help="compile without a GPU (CI)")
    p_warm.add_argument("--engine", choices=("all", "vllm", "sglang"), default="all",
                        help="only the variants this engine's adapter hits (default: all)")
    p_warm.add_argument("--processes", type=int, default=None, help="build processes (default: one per CPU)")
    args = parser.parse_args(argv)
    if args.cmd == "info":
        info = collect_info()
        print(json.dumps(info, indent=2)) if args.json else _print_info(info)
        return 0
    if args.cmd == "demo":
        return _cmd_demo(args)
    return _cmd_warmup(args)


if __name__ == "__main__":
    sys.exit(main())
