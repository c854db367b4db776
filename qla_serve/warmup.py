"""``qla-serve warmup``: compile every kernel variant a model needs before the server takes traffic."""
from __future__ import annotations

import time


def variants_for(config: dict, tp_sizes: list[int] | None = None) -> list[tuple[int, int]]:
    """Per-rank (H, HV) GDN head counts of a Qwen3-Next / Qwen3.5 config.json at each TP size."""
    cfg = config.get("text_config", config)  # Qwen3.5 nests the language model's config
    try:
        h, hv = int(cfg["linear_num_key_heads"]), int(cfg["linear_num_value_heads"])
    except KeyError as exc:
        raise ValueError(f"config has no {exc.args[0]}: not a Qwen3-Next / Qwen3.5 GDN model") from None
    for dim in ("linear_key_head_dim", "linear_value_head_dim"):
        if int(cfg.get(dim, 128)) != 128:
            raise ValueError(f"{dim} = {cfg[dim]}: the qla-serve kernels need 128")
    out = []
    for tp in tp_sizes or [1]:
        if h % tp or hv % tp:
            raise ValueError(f"tp={tp} does not divide the GDN heads {h}/{hv}")
        out.append((h // tp, hv // tp))
    return out


def warmup(heads: list[tuple[int, int]], pool_dtypes: list[str] | None = None, compile_only: bool = False) -> int:
    from .kernels import hopper

    t0 = time.perf_counter()
    for h, hv in heads:
        t = time.perf_counter()
        n = hopper.warmup(num_heads=h, num_v_heads=hv, pool_dtypes=pool_dtypes or ["fp32", "bf16"],
                          compile_only=compile_only)
        print(f"heads {h}/{hv}: {n} variants ready in {time.perf_counter() - t:.1f} s")
    print(f"warm-up done in {time.perf_counter() - t0:.1f} s")
    return 0
