"""Hopper (sm_90) TileLang GDN prefill: two fused kernels on the engine's state pool (after a q/k
l2norm pass when the call asks for l2norm), and the gating kernel of ``qla_serve.gdn_gating``.

    qk_norm.py     (calls asking for l2norm) q, k normalised once per key head into compact buffers;
                   with ``gdn_prefill(gates=...)`` g and β from the raw gate inputs in the same launch
    gating.py      (``qla_serve.gdn_gating``, and ``gates=`` calls without l2norm) g and β from an
                   engine's raw gate inputs
    kkt_solve.py   per (chunk, key head): γ = cumsum(g), Aβ = (I + StrictLower(β K Kᵀ ⊙ D))⁻¹ diag(β)
                   for the key head's value heads
    fused_fwd.py   per (V block, value head, sequence): warp-specialised state walk + output, state
                   read from and written to ``state_pool[state_indices[n]]`` in place
    cp.py, cp_combine.py   exact intra-card context parallelism for long sequences with few heads
                   (fused_fwd phases 1 and 3 around a combine kernel)
    cp_tail.py     CP tail starts (unit-norm keys): how many chunks each partition's phase 1 walks, one launch

Entry points used by :mod:`qla_serve.dispatch`: :func:`why_not` and :func:`gdn_prefill_hopper`;
:func:`gating_why_not` and :func:`gdn_gating_hopper`; :func:`conv_why_not` and :func:`gdn_conv_hopper`.
Warm-up (``qla-serve warmup``): :func:`variants_for_heads` lists the compile-time variants a model
needs and :func:`warmup` compiles them (into this process's cache and TileLang's disk cache).

Compile-time choices (a *variant*): H, HV, K, V, input dtype, pool dtype, state layout, q/k
l2norm (its pass; inside the kernels with ``QLA_L2NORM=kernel``), whether ``has_initial_state`` is
given, the V-block width, the scale, the token strides (one set per engine's buffer layout).
Sequence lengths, the number of sequences and the pool's row count and row stride are dynamic.
Per-batch choices (the V-block width, CP partitions) come from the host plan (:func:`plan_hopper`,
:func:`cp.plan_cp`): a call with a plan reads nothing back from the device.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import torch

from qla_serve.plan import HOST_CACHES

CHUNK = 64
SUPPORTED_DK = (128,)
SUPPORTED_DV = (128,)
# Only what the H200 tests covered: bf16 activations; fp32 or bf16 pools (fp16 goes to the reference).
IN_DTYPES = {torch.bfloat16: "bfloat16"}
POOL_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16"}
MAX_SEQS = 65535           # the fused kernel puts sequences on grid z
BLOCK_V_CHOICES = (128, 64)  # what the plan picks and warm-up builds
KERNEL_BLOCK_V = (64, 128)  # what fused_fwd compiles (one consumer warpgroup per 64 V rows)
BLOCK_V_ENV = "QLA_BLOCK_V"     # benchmarking aid: force the V-block width
DIRECT_LAUNCH_ENV = "QLA_DIRECT_LAUNCH"   # 0: launch through TileLang's Python wrapper (A/B aid)
PERSISTENT_ENV = "QLA_PERSISTENT"         # A/B aid: 1 / 0 force the walk's persistent / one-CTA-per-item form
L2NORM_ENV = "QLA_L2NORM"       # A/B aid: "kernel" normalises q/k inside kkt_solve and the walk (else a pass)
# Tests: 1 NaN-fills kkt_solve's Aβ buffer before every call. kkt_solve writes only Aβ's blocks on
# and below the diagonal (kkt_solve.ABETA_PANEL), so a walk that read any other element of a real
# row would show NaN in the output.
ABETA_POISON_ENV = "QLA_ABETA_POISON"

_lock = threading.Lock()
_kernels: dict[tuple, Any] = {}
compile_count = 0          # number of TileLang compiles done by this process (tests read it)
_skip: set[str] = set()    # benchmarking aid: {"fwd"} launches only kkt_solve (output then garbage)


# ----------------------------------------------------------------------------------------------
# Variants and compilation


@dataclass(frozen=True)
class Variant:
    """One compile-time configuration of the prefill (both kernels)."""

    num_k_heads: int
    num_v_heads: int
    head_k_dim: int = 128
    head_v_dim: int = 128
    dtype: str = "bfloat16"            # q/k/v/out
    pool_dtype: str = "float32"
    state_layout: str = "vk"
    use_qk_l2norm: bool = False
    has_initial_state: bool = True     # a has_initial_state tensor is passed
    block_v: int = 128
    scale: float | None = None         # None: head_k_dim ** -0.5
    packed_qkv: bool = False           # q, k, v are views of one [T, 2·H·K + HV·V] buffer
    strides: tuple[int, ...] | None = None   # explicit token strides (q, k, v, out, g, beta)

    def after_l2norm_pass(self) -> "Variant":
        """The variant kkt_solve and the walk run when :mod:`qk_norm` has normalised q and k into
        compact buffers first (this variant's own if it asks for no l2norm, or the kernels do it)."""
        if not self.use_qk_l2norm or not l2norm_in_pass():
            return self
        H, HV, Kd, Vd = self.num_k_heads, self.num_v_heads, self.head_k_dim, self.head_v_dim
        st = (H * Kd, H * Kd) + self.resolved_strides()[2:]
        contiguous = (H * Kd, H * Kd, HV * Vd, HV * Vd, HV, HV)
        return dataclasses.replace(self, use_qk_l2norm=False, packed_qkv=False,
                                   strides=None if st == contiguous else st)

    def call_forms(self) -> tuple["Variant", ...]:
        """The variants a model's calls of this form run: itself and, for packed or strided token
        rows, the compact form that a 1-token batch runs on (``gdn_prefill_hopper`` copies such a
        batch: a size-1 dim's stride is arbitrary). Warm-up builds both."""
        if not self.packed_qkv and self.strides is None:
            return (self,)
        return (self, dataclasses.replace(self, packed_qkv=False, strides=None))

    def resolved_scale(self) -> float:
        return float(self.head_k_dim ** -0.5 if self.scale is None else self.scale)

    def resolved_strides(self) -> tuple[int, int, int, int, int, int]:
        """Token strides (elements) of q, k, v, out, g, beta."""
        if self.strides is not None:
            return tuple(int(x) for x in self.strides)
        H, HV, Kd, Vd = self.num_k_heads, self.num_v_heads, self.head_k_dim, self.head_v_dim
        if self.packed_qkv:
            w = 2 * H * Kd + HV * Vd
            return (w, w, w, HV * Vd, HV, HV)
        return (H * Kd, H * Kd, HV * Vd, HV * Vd, HV, HV)


def _target() -> str | None:
    return os.environ.get("TILELANG_DEFAULT_TARGET") or None


class CompiledKernel:
    """A compiled TileLang kernel, launched through its TVM-FFI entry function.

    Every kernel here takes all its buffers as arguments, so TileLang's Python wrapper (argument
    count check, device lookup, allocation of outputs these kernels do not have) is pure overhead:
    ~3 µs a launch on the CPU machine, so ≈ 8 µs on the H200's host, where a launch measured
    33–45 µs in all. The generated host code still checks every argument's shape, dtype, strides and
    device, so a wrong call fails exactly as through the wrapper. ``QLA_DIRECT_LAUNCH=0`` keeps the
    wrapper (A/B). Attributes (``get_kernel_source``, ``adapter``) are the TileLang kernel's."""

    def __init__(self, kernel: Any):
        self.kernel = kernel
        self.direct = _entry_function(kernel)
        self._launch = self.direct or kernel

    def __call__(self, *args: Any) -> Any:
        return self._launch(*args)

    def __getattr__(self, name: str) -> Any:
        if name == "kernel":                    # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.kernel, name)


def _entry_function(kernel: Any) -> Any:
    """The kernel's TVM-FFI ``main`` (TileLang 0.1.15's tvm_ffi adapter), or None to keep the wrapper."""
    if os.environ.get(DIRECT_LAUNCH_ENV, "1") == "0":
        return None
    try:
        import tvm_ffi

        adapter = kernel.adapter
        if adapter.result_idx:                  # TileLang allocates outputs: keep its wrapper
            return None
        ex = adapter._get_executable()          # a Module when loaded from the disk cache
        mod = ex if isinstance(ex, tvm_ffi.Module) else ex.jit()
        return mod.main
    except Exception as exc:                    # another adapter or TileLang version: the wrapper
        if not _direct_launch_refused:
            _direct_launch_refused.append(repr(exc))
            logging.getLogger("qla_serve").info(
                "qla-serve: TileLang kernels launch through TileLang's wrapper (no TVM-FFI entry: %r)", exc)
        return None


_direct_launch_refused: list[str] = []          # the first reason, logged once


def _compile(prim_func, pass_configs) -> CompiledKernel:
    import tilelang

    global compile_count
    kwargs = {"pass_configs": pass_configs}
    target = _target()
    if target is not None:
        kwargs["target"] = target
    kernel = tilelang.compile(prim_func, **kwargs)
    compile_count += 1
    return CompiledKernel(kernel)


_preloaded_in_process = False   # set by mark_preloaded(): from then on a kernel build is a stall to report


def mark_preloaded(done: bool = True) -> None:
    """An engine adapter's start-up preload is done (``qla_serve.warmup.preload``): every kernel
    compiled or loaded after this is logged, with its time, because a serving step waits for it.
    ``done=False`` while a preload itself runs (a second one, for other heads, builds on purpose)."""
    global _preloaded_in_process
    _preloaded_in_process = done


def _get(key: tuple, build) -> Any:
    kern = _kernels.get(key)
    if kern is not None:
        return kern
    with _lock:
        kern = _kernels.get(key)
        if kern is None:
            t0 = time.perf_counter()
            kern = build()
            _kernels[key] = kern
            if _preloaded_in_process:
                logging.getLogger("qla_serve").warning(
                    "qla-serve: kernel %s built or loaded at first use after start-up in %.2f s (the "
                    "step that needed it waited; warm-up does not cover this shape class)", key[0], time.perf_counter() - t0)
    return kern


GATE_DTYPES = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32"}


def gating_kernel(HV: int, ab_dtype: str, a_log_dtype: str, dt_bias_dtype: str, strides: tuple[int, int],
                  threshold: float):
    """strides: token strides of a and b."""
    from . import gating

    strides = tuple(int(x) for x in strides)
    key = ("gating", HV, ab_dtype, a_log_dtype, dt_bias_dtype, strides, float(threshold))
    return _get(key, lambda: _compile(gating.build_gating(HV, ab_dtype, a_log_dtype, dt_bias_dtype, strides,
                                                          float(threshold)), gating.PASS_CONFIGS))


def gating_variants(num_v_heads: int, ab_dtypes=("bfloat16",), param_dtypes=("float32", "bfloat16"),
                    threshold: float = 20.0) -> list[tuple]:
    """Arguments of :func:`gating_kernel` for compact a/b of these dtypes (warm-up's list; vLLM keeps
    A_log in fp32 and dt_bias in the model dtype, other engines may differ)."""
    return [(num_v_heads, ab, pa, pd, (num_v_heads, num_v_heads), threshold)
            for ab in ab_dtypes for pa in param_dtypes for pd in param_dtypes]


def gating_spec(HV: int, a: torch.Tensor, b: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor,
                threshold: float) -> tuple:
    """The compile-time form of a gating call (:func:`gating_kernel`'s arguments; the ``gating``
    argument of :func:`qk_norm_kernel`)."""
    return (HV, GATE_DTYPES[a.dtype], GATE_DTYPES[A_log.dtype], GATE_DTYPES[dt_bias.dtype],
            (_tstride(a, HV), _tstride(b, HV)), float(threshold))


def gating_why_not(call: dict[str, Any]) -> str | None:
    for name in ("a", "b", "A_log", "dt_bias"):
        x = call[name]
        if x.dtype not in GATE_DTYPES:
            return f"the gating kernel takes bf16, fp16 or fp32 {name}, got {x.dtype}"
    if call["a"].dtype != call["b"].dtype:
        return "the gating kernel needs a and b of one dtype"
    for name in ("a", "b"):
        x = call[name]
        if x.numel() and x.stride(-1) != 1:
            return f"the gating kernel needs {name} with a contiguous last dim"
    for name in ("A_log", "dt_bias"):
        if call[name].stride(0) != 1:
            return f"the gating kernel needs a contiguous {name}"
    return None


def gdn_gating_hopper(a: torch.Tensor, b: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor,
                      g: torch.Tensor, beta: torch.Tensor, threshold: float) -> None:
    """g, beta ``[T, HV]`` fp32 from validated inputs (see :func:`qla_serve.gdn_gating`)."""
    T_, HV = a.shape
    if T_ == 0:
        return
    if T_ == 1:     # a 1-token view's stride is arbitrary; the kernel's is compile-time
        a, b = a.contiguous(), b.contiguous()
    gating_kernel(*gating_spec(HV, a, b, A_log, dt_bias, threshold))(a, b, A_log, dt_bias, g, beta)


CONV_STATE_DTYPES = {torch.bfloat16: "bfloat16", torch.float32: "float32"}


def conv_kernel(H: int, HV: int, width: int, dtype: str, state_dtype: str, state_layout: str, has_bias: bool,
                l2norm_qk: bool, has_initial_state: bool, x_stride: int):
    """The causal conv (:mod:`conv`) for one variant; ``x_stride``: the projections' token stride."""
    from . import conv

    key = ("conv", H, HV, int(width), dtype, state_dtype, state_layout, bool(has_bias), bool(l2norm_qk),
           bool(has_initial_state), int(x_stride))
    return _get(key, lambda: _compile(conv.build_conv(H, HV, 128, 128, int(width), dtype, state_dtype, state_layout,
                                                      bool(has_bias), bool(l2norm_qk), bool(has_initial_state),
                                                      int(x_stride)), conv.PASS_CONFIGS))


def conv_variants(num_k_heads: int, num_v_heads: int, state_dtypes=("bfloat16",), width: int = 4,
                  layouts=("sd",)) -> list[tuple]:
    """Arguments of :func:`conv_kernel` an engine's adapter hits (warm-up's list): contiguous
    projections, no bias, l2norm on, a has_initial_state vector (vLLM's conv state: the model's
    dtype, layout "sd" unless ``VLLM_SSM_CONV_STATE_LAYOUT`` says otherwise)."""
    x_stride = 2 * num_k_heads * 128 + num_v_heads * 128
    return [(num_k_heads, num_v_heads, width, "bfloat16", sdt, lay, False, True, True, x_stride)
            for sdt in state_dtypes for lay in layouts]


def conv_why_not(call: dict[str, Any]) -> str | None:
    x, weight, bias, state = call["x"], call["weight"], call["bias"], call["conv_state"]
    if x.dtype not in IN_DTYPES:
        return f"the conv kernel takes bf16 projections, got {x.dtype}"
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.dtype != x.dtype:
            return f"the conv kernel needs {name} in x's dtype {x.dtype}, got {t.dtype}"
    if state.dtype not in CONV_STATE_DTYPES:
        return f"the conv kernel takes a bf16 or fp32 conv state, got {state.dtype}"
    if call["activation"] != "silu":
        return f"the conv kernel applies silu, not {call['activation']!r}"
    if call["head_k_dim"] != 128 or (x.shape[1] - call["qk_channels"]) % 128:
        return "the conv kernel takes heads of 128 channels"
    if weight.stride() != (weight.shape[1], 1) or (bias is not None and bias.stride(0) != 1):
        return "the conv kernel needs a contiguous weight and bias"
    if not call["out"].is_contiguous():
        return "the conv kernel writes a contiguous out"
    if state.shape[0] >= 2 ** 31 // max(1, state.stride(0)):
        return "conv_state too large for 32-bit row indexing"
    plan = call["plan"]
    if plan.num_seqs > MAX_SEQS:
        return f"the conv kernel takes at most {MAX_SEQS} sequences per call, got {plan.num_seqs}"
    return None


def gdn_conv_hopper(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, conv_state: torch.Tensor,
                    conv_state_layout: str, state_indices: torch.Tensor, has_initial_state: torch.Tensor | None,
                    plan, out: torch.Tensor, qk_channels: int, head_k_dim: int, l2norm_qk: bool,
                    activation: str | None, null_slot: int | None) -> None:
    """Validated inputs (see :func:`qla_serve.gdn_conv`); fills ``out``, updates the conv state rows."""
    T_, CD = x.shape
    H = qk_channels // (2 * head_k_dim)
    HV = (CD - qk_channels) // 128
    if T_ == 1:     # a 1-token view's stride is arbitrary; the kernel's is compile-time
        x = x.contiguous()
    kern = conv_kernel(H, HV, weight.shape[1], IN_DTYPES[x.dtype], CONV_STATE_DTYPES[conv_state.dtype],
                       conv_state_layout, bias is not None, l2norm_qk, has_initial_state is not None,
                       _tstride(x, CD))
    idx = state_indices.to(torch.int32).contiguous()
    hinit = idx.view(torch.uint8)[:plan.num_seqs] if has_initial_state is None else \
        has_initial_state.contiguous().view(torch.uint8)
    null = -1 if null_slot is None else int(null_slot)
    if bias is None:
        kern(x, weight, conv_state, plan.chunk_bounds, idx, hinit, out, null)
    else:
        kern(x, weight, bias, conv_state, plan.chunk_bounds, idx, hinit, out, null)


def _abeta_dtype(in_dtype: torch.dtype) -> torch.dtype:
    """Aβ's dtype between kkt_solve and the walk: ``kkt_solve.A_DTYPE`` (fp16 since session 42). A
    kkt_solve.py without it (an A/B copy of an older one, bench_serving/kernel_ab.sh) wrote the input
    dtype."""
    from . import kkt_solve
    name = getattr(kkt_solve, "A_DTYPE", None)
    return getattr(torch, name) if name else in_dtype


KKT_CTAS_PER_SM = 4     # kkt_solve.MIN_BLOCKS: CTAs of kkt_solve one SM holds at once


def kkt_kernel(H: int, HV: int, K: int, dtype: str, use_qk_l2norm: bool, strides: tuple[int, int, int],
               heads_per_cta: int | None = None):
    """strides: token strides of k, g, beta. heads_per_cta: value heads one CTA walks
    (:func:`kkt_heads_per_cta`; None or HV / H: all of its key head's, the default form)."""
    from . import kkt_solve

    strides = tuple(int(x) for x in strides)
    if heads_per_cta is not None and heads_per_cta >= HV // H:
        heads_per_cta = None            # the default form: one key (and cache entry) for it
    key = ("kkt", H, HV, K, dtype, bool(use_qk_l2norm), strides) + (
        () if heads_per_cta is None else (("heads_per_cta", int(heads_per_cta)),))
    return _get(key, lambda: _compile(kkt_solve.build_kkt_solve(H, HV, K, dtype, bool(use_qk_l2norm), strides,
                                                                heads_per_cta), kkt_solve.PASS_CONFIGS))


def kkt_heads_per_cta(num_chunks: int, num_k_heads: int, num_v_heads: int, sms: int) -> int:
    """Value heads one kkt_solve CTA walks for a call of ``num_chunks`` chunks: its key head's
    G = HV / H halved while the doubled grid (chunks × key heads × CTAs per key head) still fits
    one wave (:data:`KKT_CTAS_PER_SM` per SM). A small grid leaves SMs idle while each CTA walks its
    G value heads one after another; split, each CTA loads K and forms K Kᵀ itself, so past one
    wave the split only repeats that work. Session 38's A/B (``results/h200-session38/``, GPU-busy
    time of whole calls, outputs bit-identical): the rule's pick was the fastest label on all 24
    rows; 2/8 1024×8, 16×512, 64×128 ×0.966–0.977 at two heads per CTA, 4/16 1×1024 ×0.877 at one,
    and one split past the wave (2/8 1×16384, 4/16 16×512) ×1.04. :func:`gdn_prefill_hopper` keeps
    the pick in ``plan.kernel_data[("hopper-kkt", H, HV)]``, where a caller (tests) may set its own."""
    G = num_v_heads // num_k_heads
    ctas, per_cta = max(1, num_chunks) * num_k_heads, G
    while per_cta % 2 == 0 and 2 * ctas <= KKT_CTAS_PER_SM * sms:
        ctas, per_cta = 2 * ctas, per_cta // 2
    return per_cta


def chunks_at_64c(plan) -> int:
    """1 where chunk c of the plan starts at token 64·c (every sequence but the last a whole number
    of chunks: one sequence, or 64-multiple lengths), else 0. kkt_solve then skips its chunk_bounds
    read (see kkt_solve.py). Kept in ``plan.kernel_data``: O(N) once per plan."""
    got = plan.kernel_data.get("hopper-chunks-at-64c")
    if got is None:
        got = int(all(n % CHUNK == 0 for n in plan.seqlens[:-1]))
        plan.kernel_data["hopper-chunks-at-64c"] = got
    return got


def kkt_split_forms(num_k_heads: int, num_v_heads: int) -> list[int]:
    """Every ``heads_per_cta`` :func:`kkt_heads_per_cta` can pick for these heads (warm-up builds them)."""
    G = num_v_heads // num_k_heads
    forms = [G]
    while forms[-1] % 2 == 0:
        forms.append(forms[-1] // 2)
    return forms


def l2norm_in_pass() -> bool:
    """Whether calls asking for l2norm run :mod:`qk_norm` first (the default) rather than
    normalising inside kkt_solve and the walk (``QLA_L2NORM=kernel``, kept for A/B runs: it made
    calls 1.20–1.44× slower in session 13)."""
    got = os.environ.get(L2NORM_ENV, "pass")
    if got not in ("pass", "kernel"):
        raise ValueError(f"{L2NORM_ENV}={got!r}: expected 'pass' or 'kernel'")
    return got == "pass"


def qk_norm_kernel(H: int, K: int, dtype: str, strides: tuple[int, int], gating: tuple | None = None):
    """strides: token strides of q and k as handed in. gating: None, or the form
    (:func:`gating_spec`) of the gates the same launch computes."""
    from . import qk_norm

    strides = tuple(int(x) for x in strides)
    key = ("qk_norm", H, K, dtype, strides, gating)
    return _get(key, lambda: _compile(qk_norm.build_qk_l2norm(H, K, dtype, strides, gating), qk_norm.PASS_CONFIGS))


def qk_norm_gating_variants(variants: Iterable["Variant"]) -> list[tuple]:
    """Arguments of :func:`qk_norm_kernel` with gates for these variants' l2norm passes (each call
    form's q/k strides × :func:`gating_variants`): what an adapter passing ``gates=`` hits."""
    out = []
    for var in dict.fromkeys(form for v in variants for form in v.call_forms()):
        if not var.use_qk_l2norm or not l2norm_in_pass():
            continue
        st = var.resolved_strides()
        for spec in gating_variants(var.num_v_heads):
            out.append((var.num_k_heads, var.head_k_dim, var.dtype, (st[0], st[1]), spec))
    return list(dict.fromkeys(out))


def qk_norm_kernel_for(var: "Variant"):
    """The l2norm pass a variant asking for l2norm runs first, or None."""
    if not var.use_qk_l2norm or not l2norm_in_pass():
        return None
    st = var.resolved_strides()
    return qk_norm_kernel(var.num_k_heads, var.head_k_dim, var.dtype, (st[0], st[1]))


def kkt_kernel_for(var: "Variant", heads_per_cta: int | None = None):
    st = var.resolved_strides()
    return kkt_kernel(var.num_k_heads, var.num_v_heads, var.head_k_dim, var.dtype, var.use_qk_l2norm,
                      (st[1], st[4], st[5]), heads_per_cta)


def persistent_walk() -> bool | None:
    """The walk form forced by ``QLA_PERSISTENT`` (A/B aid): "1" persistent, "0" one CTA per item;
    None (unset) leaves it to :func:`persistent_pays`."""
    got = os.environ.get(PERSISTENT_ENV)
    return None if got in (None, "") else got != "0"


def pool_takes_tma(state_pool: torch.Tensor) -> bool:
    """Whether TMA can read the pool's state rows (the persistent walk prefetches each item's start
    state with it): base address and slot stride multiples of 16 bytes (the rest of a slot is
    contiguous: validated). Engines' pools are; a pool that is not runs the one-CTA-per-item walk."""
    return state_pool.data_ptr() % 16 == 0 and state_pool.stride(0) * state_pool.element_size() % 16 == 0


def persistent_pays(seqlens: Sequence[int], ctas_per_seq: int, block_v: int, sms: int) -> bool:
    """Whether the prefill's walk runs persistent: one CTA per SM walking (sequence, head, V block)
    items one after another, so that the next item's loads and chunk-only products overlap the
    current one's last chunks (session 9: GPU time ×0.85–0.91 on 16/32 and 2/8 64×128 and
    256×1+4096, within ±3 % on rows of few or long items). Its static deal cannot leave a CTA with a long
    item out of later rounds the way the block scheduler's greedy order does (16/32
    7000+600+300+200+92: ×1.06), so it runs only where no item outlasts the mean CTA's share of
    the work (:data:`WALK_COST_US`)."""
    fixed, per_chunk = WALK_COST_US[block_v]
    chunks = [(n + CHUNK - 1) // CHUNK for n in seqlens] or [0]
    items = len(chunks) * ctas_per_seq
    total = ctas_per_seq * (fixed * len(chunks) + per_chunk * sum(chunks))
    return fixed + per_chunk * max(chunks) <= total / max(1, min(items, sms)) * (1 + 1e-9)


def fwd_kernel(var: Variant, phase: int = 0, persistent: bool | None = None, tail_start: bool = False):
    """The fused walk for a variant. ``phase``: 0 the prefill; 1 and 3 the CP partial and output
    passes (see :mod:`fused_fwd` and :mod:`cp`). ``persistent`` (phase 0): the walk's persistent
    form (launched with ``plan_hopper``'s CTA count); None: the persistent one unless
    ``QLA_PERSISTENT=0``. Warm-up builds both forms (:func:`walk_forms`)."""
    from . import fused_fwd

    if persistent is None:
        persistent = persistent_walk() is not False
    persistent = phase == 0 and bool(persistent)
    scale = var.resolved_scale()
    strides = var.resolved_strides()[:4]
    key = ("fwd", var.num_k_heads, var.num_v_heads, var.head_k_dim, var.head_v_dim, var.block_v,
           var.dtype, var.pool_dtype, var.state_layout, bool(var.use_qk_l2norm),
           bool(var.has_initial_state), scale, strides, int(phase), persistent) + (("tail",) if tail_start else ())
    return _get(key, lambda: _compile(
        fused_fwd.build_fused_fwd(var.num_k_heads, var.num_v_heads, var.head_k_dim, var.head_v_dim,
                                  var.block_v, var.dtype, var.pool_dtype, var.state_layout,
                                  bool(var.use_qk_l2norm), bool(var.has_initial_state), scale, strides,
                                  int(phase), persistent, bool(tail_start)),
        fused_fwd.PASS_CONFIGS))


def variants_for_heads(
    num_k_heads: int, num_v_heads: int, *, head_k_dim: int = 128, head_v_dim: int = 128,
    dtypes: Sequence[str] = ("bfloat16",), pool_dtypes: Sequence[str] = ("float32", "bfloat16"),
    state_layouts: Sequence[str] = ("vk",), use_qk_l2norm: Sequence[bool] = (False, True),
    has_initial_state: Sequence[bool] = (True, False), block_v: Sequence[int] = BLOCK_V_CHOICES,
    scale: float | None = None, packed_qkv: Sequence[bool] = (False, True),
) -> list[Variant]:
    """Every variant a model with these head counts can hit (narrow the axes to what the engine
    uses: vLLM passes has_initial_state and l2-normalises q/k itself; SGLang passes no
    has_initial_state, asks for in-kernel l2norm and hands q/k/v as views of its packed qkv buffer
    (``packed_qkv``); the pool dtype is the engine's ssm dtype). Token strides are compile-time: a
    call whose q/k/v are neither contiguous nor packed ``[T, 2·H·K + HV·V]`` views compiles its own
    variant on first use."""
    return [Variant(num_k_heads, num_v_heads, head_k_dim, head_v_dim, dt, pdt, lay, bool(l2), bool(hi), bv, scale,
                    bool(pk))
            for dt in dtypes for pdt in pool_dtypes for lay in state_layouts for l2 in use_qk_l2norm
            for hi in has_initial_state for bv in block_v for pk in packed_qkv]


def _cp_kernels(var: Variant) -> None:
    from . import cp
    cp.warmup_cp([var], log=None)


def walk_forms() -> list[bool]:
    """The phase-0 walk forms a plan can pick (both, unless ``QLA_PERSISTENT`` forces one)."""
    forced = persistent_walk()
    return [True, False] if forced is None else [forced]


def _fwd_kernels(var: Variant) -> None:
    for persistent in walk_forms():
        fwd_kernel(var, persistent=persistent)


def _kkt_kernels(var: Variant) -> None:
    for heads_per_cta in kkt_split_forms(var.num_k_heads, var.num_v_heads):
        kkt_kernel_for(var, heads_per_cta)


def build_variant(var: Variant) -> None:
    """Process-pool entry: compile one variant (its l2norm pass if any, kkt_solve in every split
    form, the prefill in both walk forms and its CP kernels) into TileLang's disk cache."""
    qk_norm_kernel_for(var)
    run = var.after_l2norm_pass()
    _kkt_kernels(run)
    _fwd_kernels(run)
    _cp_kernels(run)


def warmup(variants: Iterable[Variant], log=print, processes: int | None = None) -> dict[str, float]:
    """Compile every variant (kkt_solve in its split forms, the fused walk in both forms and its CP
    kernels) now; returns seconds per kernel key. A compile that TileLang
    finds in its disk cache (``TILELANG_CACHE_DIR``, default ``~/.tilelang/cache``) is a load.

    ``processes`` > 1 first builds the variants in that many worker processes (each compile runs nvcc
    on one core), then loads them here from the disk cache (~0.4 s each). Each variant brings its
    1-token form (:meth:`Variant.call_forms`)."""
    variants = list(dict.fromkeys(form for var in variants for form in var.call_forms()))
    if processes and processes > 1 and len(variants) > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        t0 = time.perf_counter()
        with ProcessPoolExecutor(max_workers=processes, mp_context=mp.get_context("spawn")) as ex:
            list(ex.map(build_variant, variants))
        if log is not None:
            log(f"qla-serve warmup: {len(variants)} variants built in {processes} processes in "
                f"{time.perf_counter() - t0:.1f} s")
    times: dict[str, float] = {}
    for var in variants:
        run = var.after_l2norm_pass()
        for what, fn in (("qk_norm", lambda: qk_norm_kernel_for(var)), ("kkt", lambda: _kkt_kernels(run)),
                         ("fwd", lambda: _fwd_kernels(run)), ("cp", lambda: _cp_kernels(run))):
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            name = f"{what} {var}"
            if name not in times:
                times[name] = dt
                if log is not None and dt > 0.01:
                    log(f"qla-serve warmup: {what} H={var.num_k_heads} HV={var.num_v_heads} {var.dtype} "
                        f"pool={var.pool_dtype} {var.state_layout} l2norm={var.use_qk_l2norm} "
                        f"has_init={var.has_initial_state} BV={var.block_v} packed_qkv={var.packed_qkv}"
                        f"{'' if var.strides is None else f' strides={var.strides}'}: {dt:.1f} s")
    return times


# ----------------------------------------------------------------------------------------------
# Host plan


_device_props: dict[int, Any] = {}


def _props(device: torch.device):
    """``torch.cuda.get_device_properties`` of a CUDA device, kept per device index."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _device_props:
        _device_props[idx] = torch.cuda.get_device_properties(idx)
    return _device_props[idx]


def _num_sms(device: torch.device) -> int:
    return _props(device).multi_processor_count


def _plan_sms(plan) -> int:
    """SMs the plan's device has: the GPU's count, or the H200's 132 for a CPU or meta plan (tests,
    warm-up lists), which the host rules were fitted on."""
    return _num_sms(plan.device) if plan.device.type == "cuda" else 132


def _plan_gpu_name(plan) -> str:
    """The plan's GPU's name, "" for a CPU or meta plan: the rules keyed by GPU model
    (:data:`PERSISTENT_COST_US`) then keep their defaults."""
    return _props(plan.device).name if plan.device.type == "cuda" else ""


# One walk CTA's time (µs) = fixed + per_chunk × its chunks, RS walk on the H200 (session 7, the
# walk as of session 6): least-squares fit (log error) of a simulation of the block scheduler's
# greedy order to every row of bench_serving/results/h200-session7/block-v/ run at both forced
# widths without CP (kkt_solve subtracted; ~10 % error per row). V-block 128 does twice the columns per CTA for
# 1.4× the per-chunk time, which is why it wins once the CTAs of V-block 64 need more than one wave.
WALK_COST_US = {64: (5.0, 1.85), 128: (10.0, 2.6)}


def walk_estimate_us(chunks: Sequence[int], ctas_per_seq: int, block_v: int, sms: int) -> float:
    """Estimated end of the walk: the longest CTA, or the work spread over the SMs (one CTA per
    SM), whichever is longer; equal lengths count whole waves. O(N) on the host, as a serving plan
    pays it for every batch: simulating the scheduler's greedy order CTA by CTA took 1.5 ms on the
    CPU machine for 256×1+4096 at 64 value heads."""
    fixed, per_chunk = WALK_COST_US[block_v]
    longest = fixed + max(chunks) * per_chunk
    jobs = len(chunks) * ctas_per_seq
    if min(chunks) == max(chunks):
        return -(-jobs // sms) * longest
    return max(longest, (jobs * fixed + ctas_per_seq * per_chunk * sum(chunks)) / sms)


def choose_block_v(seqlens: Sequence[int], num_v_heads: int, head_v_dim: int = 128, sms: int = 132) -> int:
    """The V-block width (64 or 128) whose walk is estimated to end first (:func:`walk_estimate_us`).

    V-block 64 has twice the CTAs and the shorter chunk step, so it wins while its CTAs fit one wave
    or one long sequence sets the time (16/32 7000+600+300+200+92: 0.28 against 0.35 ms at 128);
    128 wins where 64 would run whole extra waves (16/32 8192×4: 0.57 against 0.74 ms). Session 6's
    rule ("128 whenever sequences × heads fill the SMs") took 128 for the first of those. CP
    (:mod:`cp`) then splits long sequences at the chosen width."""
    if head_v_dim % 64:
        return 128
    chunks = [(n + CHUNK - 1) // CHUNK for n in seqlens] or [0]
    t64 = walk_estimate_us(chunks, num_v_heads * (head_v_dim // 64), 64, sms)
    t128 = walk_estimate_us(chunks, num_v_heads * max(1, head_v_dim // 128), 128, sms)
    return 64 if t64 <= t128 else 128


# The persistent walk's cost per item, fixed + per_chunk × its chunks (µs), by GPU model (a substring
# of the device name) and V-block. Session 62 (bench_serving/results/h200-session62/bv-sweep/, H100
# 80GB HBM3): least-squares fit (log error) of persistent_estimate_us to the walk's GPU time (the
# call's, less kkt_solve alone) on 90 / 87 rows run at each forced width, six head configs, items of 1
# to 64 chunks; 10 % rms error. A (sequence, head) of c chunks then costs 2 · (3.31 + 1.81 c) at
# V-block 64 against 8.38 + 2.92 c at 128: 64 ends first below ~2.5 chunks an item, which the
# one-CTA-per-item model above (fitted on the H200's walk of session 6, where the persistent form did
# not exist) does not see. On that sweep, V-block 64 took 64×128 ×0.90–0.95 at 16/32–16/64 and
# 256×1+4096 ×0.87–0.92 at every head config. Session 63 made the final-state store paired (both
# widths faster on short items) and ran the sweep again (h200-session63/bv-sweep/): these constants
# pick within ×1.004 of the faster width there (geometric mean over its 96 rows; ×1.018 without the
# narrowing). Its own refit (64: 2.55 + 1.73 c, 128: 6.24 + 2.71 c) picks worse (×1.008: it stops
# narrowing 64×128, where 64 is still ×0.93–0.96 at 16/32–16/64), so the constants stay. No H200 has
# run this comparison on the current walk: it keeps the rule above.
PERSISTENT_COST_US = {"H100": {64: (3.31, 1.81), 128: (8.38, 2.92)}}


def persistent_cost_us(gpu_name: str) -> dict[int, tuple[float, float]] | None:
    """:data:`PERSISTENT_COST_US`'s constants for this GPU (None: none measured)."""
    return next((model for key, model in PERSISTENT_COST_US.items() if key in gpu_name), None)


def persistent_estimate_us(chunks: Sequence[int], ctas_per_seq: int, cost: tuple[float, float], sms: int) -> float:
    """The persistent walk's end: its longest item, or all items' cost dealt evenly over the CTAs
    (one per SM), whichever is longer (its deal alternates direction each round)."""
    fixed, per_chunk = cost
    items = len(chunks) * ctas_per_seq
    spread = ctas_per_seq * (fixed * len(chunks) + per_chunk * sum(chunks)) / max(1, min(items, sms))
    return max(fixed + per_chunk * max(chunks, default=0), spread)


def narrow_for_persistent(seqlens: Sequence[int], num_v_heads: int, head_v_dim: int, block_v: int, sms: int,
                          gpu_name: str) -> int:
    """64 where the plan's ``block_v`` is 128, the row is not split by CP at either width, the walk
    runs persistent at 64, and this GPU's :data:`PERSISTENT_COST_US` has 64 ending first; else
    ``block_v``. Host data only."""
    from . import cp

    cost = persistent_cost_us(gpu_name)
    if cost is None or block_v != 128 or head_v_dim % 128 or persistent_walk() is False:
        return block_v
    chunks = [(n + CHUNK - 1) // CHUNK for n in seqlens]
    per128 = num_v_heads * (head_v_dim // 128)
    if (not chunks or not persistent_pays(seqlens, 2 * per128, 64, sms)
            or cp.split_parts(seqlens, num_v_heads, head_v_dim, 128, sms) is not None
            or cp.split_parts(seqlens, num_v_heads, head_v_dim, 64, sms) is not None):
        return block_v
    t64 = persistent_estimate_us(chunks, 2 * per128, cost[64], sms)
    t128 = persistent_estimate_us(chunks, per128, cost[128], sms)
    return 64 if t64 < t128 else block_v


def planned_block_v(seqlens: Sequence[int], num_v_heads: int, head_v_dim: int = 128, sms: int = 132,
                    unit_norm_keys: bool = False) -> int:
    """The plan's V-block on any GPU: :func:`choose_block_v`, widened to 128 for rows CP splits at 128
    to more effect (:func:`cp.widen_block_v`; ``unit_norm_keys``: the plan's, which allows tail
    starts). The plan then narrows it on GPUs with a measured persistent-walk cost
    (:func:`narrow_for_persistent`, in :func:`_host_choice`)."""
    from . import cp

    return cp.widen_block_v(seqlens, num_v_heads, head_v_dim, choose_block_v(seqlens, num_v_heads, head_v_dim, sms),
                            sms, tail=cp.tail_starts_for(unit_norm_keys))


def plan_hopper(plan, num_v_heads: int, head_v_dim: int = 128) -> dict[str, int]:
    """Host-only variant choice for a batch, stored in ``plan.kernel_data`` (keyed by HV and V).

    V-block width: :func:`planned_block_v`, then :func:`narrow_for_persistent` for the plan's GPU.
    ``QLA_BLOCK_V`` forces a width (A/B runs). The walk's form (:func:`persistent_walk`) and, for the
    persistent one, its CTA count. Reads only host fields of the plan.
    """
    key = ("hopper", num_v_heads, head_v_dim)
    got = plan.kernel_data.get(key)
    if got is not None and "ctas" in got:
        return got
    sms = _plan_sms(plan)
    if got is None:
        got = dict(_host_choice(plan.seqlens, num_v_heads, head_v_dim, sms, plan.unit_norm_keys, _choice_env(),
                                _plan_gpu_name(plan)))
        plan.kernel_data[key] = got
        return got
    # a caller (tests, the benches) set the width, maybe the form
    got = dict(_walk_form(plan.seqlens, num_v_heads, head_v_dim, int(got["block_v"]), sms,
                          bool(got["persistent"]) if "persistent" in got else None))
    plan.kernel_data[key] = got
    return got


def _walk_form(seqlens: Sequence[int], num_v_heads: int, head_v_dim: int, block_v: int, sms: int,
               persistent: bool | None) -> tuple[tuple[str, Any], ...]:
    """The walk at ``block_v``: its form (``persistent`` when given, else :func:`persistent_walk`,
    else :func:`persistent_pays`) and CTA count. The persistent walk runs one CTA per SM (its shared
    memory and registers leave no room for a second), never more CTAs than items."""
    if persistent is None:
        persistent = persistent_walk()
    if persistent is None:
        persistent = persistent_pays(seqlens, num_v_heads * (head_v_dim // block_v), block_v, sms)
    items = len(seqlens) * num_v_heads * (head_v_dim // block_v)
    return (("block_v", block_v), ("persistent", persistent), ("ctas", max(1, min(items, sms))))


def _choice_env() -> tuple[str, ...]:
    """The environment the plan's choices read (forced widths and forms, CP switches): part of the
    key of :func:`_host_choice`, so a changed variable is never answered from the cache."""
    from . import cp

    return tuple(os.environ.get(name, "") for name in (BLOCK_V_ENV, PERSISTENT_ENV) + cp.CHOICE_ENVS)


@functools.lru_cache(maxsize=256)
def _host_choice(seqlens: tuple[int, ...], num_v_heads: int, head_v_dim: int, sms: int, unit_norm_keys: bool,
                 env: tuple[str, ...], gpu_name: str = "") -> tuple[tuple[str, Any], ...]:
    """:func:`plan_hopper`'s choice for a batch shape (V-block, walk form, CTA count), a pure function
    of host data and ``env`` (:func:`_choice_env`), kept per batch shape: a serving engine's batches
    repeat their shapes, and the choice costs 20–60 µs of Python on the CPU machine (the V-block's
    CP cost models). Where :func:`narrow_for_persistent` took 64 for the persistent walk, the choice
    also holds ``item_block_v``, the width the call walks at when the pool turns out not to be
    TMA-readable and the walk runs one CTA per item instead (:func:`call_block_v`)."""
    forced = env[0]
    if forced:
        block_v = int(forced)
        if block_v not in KERNEL_BLOCK_V or head_v_dim % block_v:
            raise ValueError(f"{BLOCK_V_ENV}={forced}: the V-block width must be one of {KERNEL_BLOCK_V} "
                             f"and divide head_v_dim {head_v_dim}")
        return _walk_form(seqlens, num_v_heads, head_v_dim, block_v, sms, None)
    wide = planned_block_v(seqlens, num_v_heads, head_v_dim, sms, unit_norm_keys)
    block_v = narrow_for_persistent(seqlens, num_v_heads, head_v_dim, wide, sms, gpu_name)
    form = _walk_form(seqlens, num_v_heads, head_v_dim, block_v, sms, None)
    return form + ((("item_block_v", wide),) if block_v != wide else ())


def call_block_v(choice: dict[str, Any], pool_tma: bool) -> tuple[int, bool]:
    """The V-block and walk form a call runs, from the plan's choice and whether TMA can read the
    pool (:func:`pool_takes_tma`): the persistent walk needs it; without it the walk runs one CTA
    per item, at ``item_block_v`` where the choice narrowed the width for the persistent form only
    (at 64×128 one CTA per item is ×1.2 slower at 64 than at 128: session 62)."""
    if choice["persistent"] and not pool_tma:
        return int(choice.get("item_block_v", choice["block_v"])), False
    return int(choice["block_v"]), bool(choice["persistent"])


HOST_CACHES.append(_host_choice)


def prepare_plan(plan, num_v_heads: int, head_v_dim: int = 128) -> None:
    """Everything :func:`gdn_prefill_hopper` derives from the plan alone (variant choice, CP tables),
    done now and kept in ``plan.kernel_data``. An engine calls it where it builds the plan, once
    per step, so that the step's first GDN layer does not pay it: CP tables alone cost 165–300 µs
    of the H200 host's time (session 7's host profile)."""
    choice = plan_hopper(plan, num_v_heads, head_v_dim)
    if plan.total_tokens > 1:
        from . import cp
        cp.plan_cp(plan, num_v_heads, head_v_dim, choice["block_v"])


# ----------------------------------------------------------------------------------------------
# Dispatch entry points


_form_answers: dict[tuple, str | None] = {}     # op's form key → _why_not_form's answer


def why_not(call: dict[str, Any]) -> str | None:
    """Reason this call cannot run on the Hopper kernels, or None. The answer for the tensors is
    kept per call form (the op's ``form`` key); the plan is checked every call. An empty call's
    answer is not kept: its stride checks are skipped (an empty view's strides mean nothing)."""
    form = call.get("form")
    if form is None or call["q"].shape[0] == 0:
        why = _why_not_form(call)
    elif form in _form_answers:
        why = _form_answers[form]
    else:
        why = _why_not_form(call)
        if len(_form_answers) < 4096:
            _form_answers[form] = why
    if why is not None:
        return why
    plan = call.get("plan")
    if plan is not None and plan.num_seqs > MAX_SEQS:
        return f"the Hopper kernel takes at most {MAX_SEQS} sequences per call, got {plan.num_seqs}"
    return None


def _why_not_form(call: dict[str, Any]) -> str | None:
    q, v, pool = call["q"], call["v"], call["state_pool"]
    Kd, Vd = q.shape[-1], v.shape[-1]
    if Kd not in SUPPORTED_DK:
        return f"the Hopper kernel needs head_k_dim 128, got {Kd}"
    if Vd not in SUPPORTED_DV:
        return f"the Hopper kernel needs head_v_dim 128, got {Vd}"
    if q.dtype not in IN_DTYPES:
        return f"the Hopper kernel needs bf16 q/k/v, got {q.dtype}"
    if pool.dtype not in POOL_DTYPES:
        return f"the Hopper kernel needs an fp32 or bf16 state pool, got {pool.dtype}"
    if call.get("checkpoints") is not None:
        return "the Hopper kernel does not write per-chunk checkpoints yet"
    if call.get("state_layout", "vk") not in ("vk", "kv"):
        return f"unknown state_layout {call.get('state_layout')!r}"
    for name in ("g", "beta"):
        x = call.get(name)
        if x is not None and x.numel() and x.stride(-1) != 1:
            return f"the Hopper kernel needs {name} with a contiguous last dim"
    out = call.get("out")
    if out is not None and out.numel() and (out.stride(-1) != 1 or out.stride(-2) != Vd):
        return "the Hopper kernel needs out rows [HV, V] contiguous"
    for name in ("q", "k"):
        x = call.get(name)
        if x is not None and x.numel() and x.stride(-2) != Kd:
            return f"the Hopper kernel needs {name} heads packed (stride(-2) == K)"
    if v.numel() and v.stride(-2) != Vd:
        return "the Hopper kernel needs v heads packed (stride(-2) == V)"
    if pool.shape[0] >= 2**31 or pool.stride(0) >= 2**31:
        return "state_pool too large for 32-bit row indexing"
    gates = call.get("gates")
    if gates is not None:
        return gating_why_not(gates._asdict())
    return None


def _tstride(x: torch.Tensor, compact: int) -> int:
    """Token stride of a [T, ...] tensor; for T <= 1 the stride is meaningless, take the compact one."""
    return int(x.stride(0)) if x.shape[0] > 1 else compact


def variant_for(q, k, v, g, beta, out, state_pool, state_layout: str, use_qk_l2norm: bool,
                has_initial_state: bool, block_v: int, scale: float) -> Variant:
    """The compile-time variant a call with these tensors runs (shapes, dtypes and token strides
    only: works on meta tensors, so warm-up lists can be derived without a GPU)."""
    T_, H, Kd = q.shape
    HV, Vd = v.shape[1], v.shape[2]
    strides = (_tstride(q, H * Kd), _tstride(k, H * Kd), _tstride(v, HV * Vd), _tstride(out, HV * Vd),
               _tstride(g, HV), _tstride(beta, HV))
    contiguous = (H * Kd, H * Kd, HV * Vd, HV * Vd, HV, HV)
    w = 2 * H * Kd + HV * Vd
    packed = (w, w, w, HV * Vd, HV, HV)
    return Variant(H, HV, Kd, Vd, IN_DTYPES[q.dtype], POOL_DTYPES[state_pool.dtype], state_layout,
                   bool(use_qk_l2norm), bool(has_initial_state), int(block_v), float(scale), strides == packed,
                   None if strides in (contiguous, packed) else strides)


_form_kernels: dict[tuple, tuple] = {}     # (op's form key, T class, block_v, walk form, l2norm pass,
                                           #  kkt heads per CTA) → _kernels_for


def _kernels_for(q, k, v, g, beta, out, state_pool, state_layout: str, use_qk_l2norm: bool, has_initial_state: bool,
                 block_v: int, scale: float, persistent: bool, spec: tuple | None, kkt_heads: int) -> tuple:
    """``(l2norm pass or None, stand-alone gating kernel or None, kkt_solve, walk, the variant they
    run)`` for a call with these tensors' forms (``spec``: :func:`gating_spec` of its gates, which
    the l2norm pass computes when there is one, else the gating kernel; ``kkt_heads``:
    :func:`kkt_heads_per_cta`)."""
    asked = variant_for(q, k, v, g, beta, out, state_pool, state_layout, use_qk_l2norm, has_initial_state, block_v,
                        scale)
    norm = gate = None
    if use_qk_l2norm and l2norm_in_pass():
        st = asked.resolved_strides()
        norm = qk_norm_kernel(asked.num_k_heads, asked.head_k_dim, asked.dtype, (st[0], st[1]), spec)
    elif spec is not None:
        gate = gating_kernel(*spec)
    var = asked.after_l2norm_pass()
    return norm, gate, kkt_kernel_for(var, kkt_heads), fwd_kernel(var, persistent=persistent), var


def gdn_prefill_hopper(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, *,
    state_pool: torch.Tensor, state_indices: torch.Tensor, has_initial_state: torch.Tensor | None,
    plan, scale: float, use_qk_l2norm: bool, out: torch.Tensor, state_layout: str,
    null_slot: int | None, checkpoints: torch.Tensor | None = None, gates=None, form=None,
) -> None:
    """Run the prefill on validated inputs (see :func:`qla_serve.gdn_prefill`); fills ``out`` and
    updates ``state_pool`` rows in place. With ``gates`` (``qla_serve.GateInputs``), ``g`` and
    ``beta`` are buffers this call fills first. ``form``: the op's key of the call's form, under
    which the kernels a form runs are kept (:func:`_kernels_for`). No device→host sync."""
    if checkpoints is not None:
        raise NotImplementedError("checkpoints: see why_not")
    T_, H, Kd = q.shape
    HV, Vd = v.shape[1], v.shape[2]
    N = plan.num_seqs
    if N == 0:
        return
    choice = plan_hopper(plan, HV, Vd)
    block_v, persistent = call_block_v(choice, pool_takes_tma(state_pool))
    out_user = None
    if T_ == 1:
        # A 1-token batch: its token strides are arbitrary; use compact copies (no sync). g and beta
        # are this call's own compact buffers when it computes them.
        copied = (q, k, v) if gates is not None else (q, k, v, g, beta)
        q, k, v, *gb = (torch.empty(x.shape, dtype=x.dtype, device=x.device).copy_(x) for x in copied)
        if gb:
            g, beta = gb
        else:
            gates = gates._replace(a=gates.a.contiguous(), b=gates.b.contiguous())
        if out.stride(0) != HV * Vd:
            out_user, out = out, torch.empty(out.shape, dtype=out.dtype, device=out.device)
    kkt_heads = plan.kernel_data.get(("hopper-kkt", H, HV))
    if kkt_heads is None:
        kkt_heads = kkt_heads_per_cta(plan.num_chunks, H, HV, _plan_sms(plan))
        plan.kernel_data[("hopper-kkt", H, HV)] = kkt_heads
    key = None if form is None else (form, min(T_, 2), block_v, persistent, l2norm_in_pass(), kkt_heads)
    kernels = _form_kernels.get(key) if key is not None else None
    if kernels is None:
        spec = None if gates is None else gating_spec(HV, gates.a, gates.b, gates.A_log, gates.dt_bias,
                                                      gates.softplus_threshold)
        kernels = _kernels_for(q, k, v, g, beta, out, state_pool, state_layout, use_qk_l2norm,
                               has_initial_state is not None, block_v, scale, persistent, spec,
                               kkt_heads)
        if key is not None and len(_form_kernels) < 4096:
            _form_kernels[key] = kernels
    norm, gate, kkt, fwd, var = kernels
    if norm is not None and T_ > 0:
        # Stage 0: q, k normalised once per key head into compact buffers (qk_norm.py), with the
        # gates in the same launch when the call hands their inputs; the kernels below then run
        # the variant without l2norm.
        qn = torch.empty(T_, H, Kd, dtype=q.dtype, device=q.device)
        kn = torch.empty(T_, H, Kd, dtype=k.dtype, device=k.device)
        if gates is None:
            norm(q, k, qn, kn)
        else:
            norm(q, k, qn, kn, gates.a, gates.b, gates.A_log, gates.dt_bias, g, beta)
        q, k = qn, kn
    elif gate is not None and T_ > 0:
        gate(gates.a, gates.b, gates.A_log, gates.dt_bias, g, beta)

    dev = q.device
    # The kernel reads both tables densely; engines may hand strided columns (vLLM's block_table[:, 0]).
    idx = state_indices.to(torch.int32).contiguous()
    if has_initial_state is None:
        hinit = idx.view(torch.uint8)[:N]            # not read by the variant without the flag
    else:
        hinit = has_initial_state.contiguous().view(torch.uint8)
    cu = plan.cu_seqlens
    if T_ > 0:
        gcum = torch.empty(T_, HV, dtype=torch.float32, device=dev)
        a = torch.empty(T_, HV, CHUNK, dtype=_abeta_dtype(q.dtype), device=dev)
        if os.environ.get(ABETA_POISON_ENV) == "1":
            a.fill_(float("nan"))
        if plan.num_chunks > 0:
            kkt(k, g, beta, plan.chunk_bounds, gcum, a, chunks_at_64c(plan))
    else:
        # No tokens: dummy 1-row buffers (no chunk reads them) keep every shape non-empty.
        q = k = torch.zeros(1, H, Kd, dtype=q.dtype, device=dev)
        v = torch.zeros(1, HV, Vd, dtype=v.dtype, device=dev)
        out = torch.empty(1, HV, Vd, dtype=v.dtype, device=dev)
        gcum = torch.zeros(1, HV, dtype=torch.float32, device=dev)
        a = torch.zeros(1, HV, CHUNK, dtype=_abeta_dtype(q.dtype), device=dev)
    # ---- intra-card context parallelism (issue 4): kernels/hopper/cp.py ----------------------------
    cp_tables = None
    if T_ > 1 and "fwd" not in _skip:
        from . import cp
        cp_tables = cp.plan_cp(plan, HV, Vd, block_v,
                               tail=cp.tail_starts_for(plan.unit_norm_keys or use_qk_l2norm))
    if cp_tables is not None:
        cp.run_cp_hopper(cp_tables, var, q=q, k=k, v=v, gcum=gcum, a=a, state_pool=state_pool, idx=idx,
                         hinit=hinit, out=out, null_slot=-1 if null_slot is None else int(null_slot))
    # ---- end of the CP branch ------------------------------------------------------------------------
    elif "fwd" not in _skip:
        null = -1 if null_slot is None else int(null_slot)
        if persistent:
            fwd(q, k, v, gcum, a, cu, idx, hinit, state_pool, out, null, plan.seq_order, choice["ctas"])
        else:
            fwd(q, k, v, gcum, a, cu, idx, hinit, state_pool, out, null)
    if out_user is not None:
        out_user.copy_(out)
