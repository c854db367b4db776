"""``qla-serve warmup``: compile every kernel variant a model needs before the server takes traffic."""
from __future__ import annotations

import os
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


POOL_DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16"}

# The variant axes each engine adapter can hit (``hopper.variants_for_heads`` keywords). Both hand
# q/k/v as views of their packed qkv buffer. vLLM's adapter passes a ``has_initial_state`` vector
# and its raw gate inputs (``gdn_prefill(gates=...)``); by default it runs vLLM's causal conv and
# asks the op to normalise q/k, so the gates ride in the l2norm pass (:data:`GATED_NORM_ENGINES`);
# with ``QLA_VLLM_CONV=qla`` it runs ``qla_serve.gdn_conv``, which normalises them
# ("vllm-qla-conv", :data:`CONV_ENGINES`), and the gates take the gating kernel
# (:data:`GATING_ENGINES`). SGLang's passes no ``has_initial_state``, its own g and beta, and asks
# the op to normalise q/k. ``all`` is the union with contiguous inputs (four times the variants).
ENGINE_AXES = {
    "vllm": dict(use_qk_l2norm=(True,), has_initial_state=(True,), packed_qkv=(True,)),
    "vllm-qla-conv": dict(use_qk_l2norm=(False,), has_initial_state=(True,), packed_qkv=(True,)),
    "sglang": dict(use_qk_l2norm=(True,), has_initial_state=(False,), packed_qkv=(True,)),
    "all": {},
}
GATING_ENGINES = ("vllm-qla-conv", "all")
GATED_NORM_ENGINES = ("vllm", "all")
CONV_ENGINES = ("vllm-qla-conv", "all")
# The vLLM adapter's switches (read by it and by warm-up, which builds what they select):
VLLM_CONV_ENV = "QLA_VLLM_CONV"     # "vllm" (default): vLLM's causal conv; "qla": qla_serve.gdn_conv
VLLM_PREP_ENV = "QLA_VLLM_PREP"     # "vllm": vLLM's fused_post_conv_prep (implies its conv)


def vllm_conv_choice() -> str:
    """"vllm" or "qla": whose causal conv the vLLM adapter runs on CUDA. vLLM's by default: on the
    H200 (session 15, ``bench_serving/layer_profile.py``) gdn_conv took 588 µs where vLLM's conv
    took 118 and the op's l2norm pass 35 (16/32 heads, 8192 tokens)."""
    if os.environ.get(VLLM_PREP_ENV, "qla") == "vllm":
        return "vllm"
    got = os.environ.get(VLLM_CONV_ENV, "vllm").strip().lower() or "vllm"
    if got not in ("qla", "vllm"):
        raise ValueError(f"{VLLM_CONV_ENV}={got!r}: expected 'vllm' or 'qla'")
    return got


def engine_axes(engine: str) -> tuple[str, dict]:
    """(the axes' name, the axes) for ``engine``: "vllm" follows :func:`vllm_conv_choice`."""
    if engine == "vllm" and vllm_conv_choice() == "qla":
        engine = "vllm-qla-conv"
    return engine, ENGINE_AXES[engine]


def _side_kernels(hopper, engine: str, heads: list[tuple[int, int]], variants) -> int:
    """Compile or load the kernels an engine's adapter calls beside the prefill variants: the
    ``gdn_conv`` kernels (:data:`CONV_ENGINES`), the stand-alone gating kernels
    (:data:`GATING_ENGINES`) and the l2norm passes that compute the gates for these variants' call
    forms (:data:`GATED_NORM_ENGINES`). Returns how many."""
    builds = []
    if engine in CONV_ENGINES:
        builds += [(hopper.conv_kernel, a) for h, hv in sorted(set(heads)) for a in hopper.conv_variants(h, hv)]
    if engine in GATING_ENGINES:
        builds += [(hopper.gating_kernel, a) for hv in sorted({hv for _, hv in heads})
                   for a in hopper.gating_variants(hv)]
    if engine in GATED_NORM_ENGINES:
        builds += [(hopper.qk_norm_kernel, a) for a in hopper.qk_norm_gating_variants(variants)]
    for build, args in builds:
        build(*args)
    return len(builds)


def warmup(heads: list[tuple[int, int]], pool_dtypes: list[str] | None = None, compile_only: bool = False,
           engine: str = "all", processes: int | None = None) -> int:
    """Compile (or load from TileLang's disk cache) every Hopper variant for these per-rank heads.

    ``compile_only`` builds for sm_90a without a GPU (nvcc only), as CI does. ``engine`` narrows
    the list to what one adapter hits (:data:`ENGINE_AXES`). All heads' variants are built in one
    process pool of ``processes`` workers (default: one per CPU; each nvcc build is one core).
    """
    import torch

    if compile_only or not torch.cuda.is_available():
        if not compile_only:
            print("warmup: no CUDA device; compiling for sm_90a only (as --compile-only)")
        os.environ.setdefault("TILELANG_DEFAULT_TARGET", "nvidia/nvidia-h100")
    from .kernels import hopper

    pools = [POOL_DTYPE_NAMES[p] for p in (pool_dtypes or ["fp32", "bf16"])]
    t0 = time.perf_counter()
    engine, axes = engine_axes(engine)
    variants = [v for h, hv in heads for v in hopper.variants_for_heads(h, hv, pool_dtypes=pools, **axes)]
    # One pool for every head count: the builds of all of them run side by side.
    hopper.warmup(variants, processes=processes or os.cpu_count())
    _side_kernels(hopper, engine, heads, variants)
    print(f"heads {', '.join(f'{h}/{hv}' for h, hv in heads)} ({engine}): {len(variants)} variants ready")
    print(f"warm-up done in {time.perf_counter() - t0:.1f} s ({hopper.compile_count} kernels built or loaded)")
    return 0


_preloaded: set[tuple] = set()   # (device, heads, pool dtype, engine) already handled in this process


def preload(device, num_k_heads: int, num_v_heads: int, pool_dtype, engine: str = "vllm", log=print) -> str | None:
    """Load into *this* process every kernel an engine adapter's prefill calls can hit for these
    per-rank heads and state-pool dtype (compiling, one at a time, what TileLang's disk cache
    lacks). An adapter calls it at start-up (vLLM: its profiling run; SGLang: the first extend,
    its warm-up request): otherwise the first request of each shape class pays the load (0.3–0.7 s
    per kernel from the disk cache; seen on the H200 as 0.3–0.7 s steps in the first mixed
    batches). Once per (device, heads, dtype, engine) per process; never raises. Returns why
    nothing was loaded (no kernel runs here, or the load failed), else None."""
    import importlib.util

    import torch

    key = (str(device), num_k_heads, num_v_heads, str(pool_dtype), engine)
    if key in _preloaded:
        return None
    _preloaded.add(key)
    try:
        from . import dispatch

        if dispatch.requested_backend() == "reference":
            return "QLA_BACKEND=reference"
        device = torch.device(device)
        if device.type != "cuda":
            return f"no qla-serve kernel for {device.type} devices"
        if torch.cuda.get_device_capability(device) != (9, 0):
            return "the kernels need sm_90"
        if importlib.util.find_spec("tilelang") is None:
            return "tilelang is not installed"
        from .kernels import hopper

        name = hopper.POOL_DTYPES.get(pool_dtype)
        if name is None:
            return f"no kernel for a {pool_dtype} state pool"
        engine, axes = engine_axes(engine)
        variants = hopper.variants_for_heads(num_k_heads, num_v_heads, pool_dtypes=(name,), **axes)
        t0 = time.perf_counter()
        hopper.mark_preloaded(False)
        try:
            with torch.cuda.device(device):
                hopper.warmup(variants, log=None)
                _side_kernels(hopper, engine, [(num_k_heads, num_v_heads)], variants)
        finally:
            hopper.mark_preloaded()
        dt = time.perf_counter() - t0
    except Exception as exc:  # kernels then load on first use: never fail a server for this
        return f"failed: {exc!r}"[:300]
    hint = " (kernels were compiled here: run `qla-serve warmup` before serving to skip this)" if dt > 30 else ""
    log(f"qla-serve: {len(variants)} kernel variants for GDN heads {num_k_heads}/{num_v_heads}, {name} state "
        f"pool, loaded in {dt:.1f} s{hint}")
    return None
