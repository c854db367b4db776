"""The three places where qla-serve meets SGLang 0.5.23, and the check that they are in place.

1. Server-argument resolution (``register_resolution_hook``, first pipeline step): accepts
   ``--linear-attn-backend qla`` by resolving it to ``--linear-attn-backend triton
   --linear-attn-prefill-backend qla``. SGLang keys the radix cache's ``extra_buffer`` mode (and
   with it the overlap scheduler) on the base flag being ``triton``; since decode and verify stay
   on Triton anyway, this resolution costs the user neither. ``--linear-attn-decode-backend qla``
   is refused: qla-serve has no decode kernel.
2. ``GDNKernelDispatcher.__init__`` (AROUND): builds the dispatcher with Triton for every phase
   asked as qla, then makes :class:`QLAGDNKernel` the extend kernel.
3. ``GDNAttnBackend.forward_extend`` (AROUND): hands the kernel the host copy of the extend
   lengths SGLang already holds, so the plan needs no device->host read.

SGLang's HookRegistry only logs a hook that fails to apply; :func:`check_hooks_applied` turns that
into a start-up error whenever qla is selected.
"""
from __future__ import annotations

import logging
import pkgutil
from typing import Any, Callable

logger = logging.getLogger("qla_serve.sglang")

BACKEND = "qla"
GDN = "sglang.srt.layers.attention.linear.gdn_backend"
DISPATCHER_INIT = f"{GDN}.GDNKernelDispatcher.__init__"
FORWARD_EXTEND = f"{GDN}.GDNAttnBackend.forward_extend"
RESOLUTION_STEP = "handle_deprecated_dp_attention"  # the pipeline's first step: runs on every path


# -- 1. server arguments ------------------------------------------------------------------------
def resolve_flags(server_args: Any, previous: Callable[[Any], None]) -> None:
    previous(server_args)
    from sglang.srt.arg_groups.overrides import declare_resolution, resolving_view

    cfg = resolving_view(server_args)
    base = cfg.linear_attn_backend
    decode = cfg.linear_attn_decode_backend
    prefill = cfg.linear_attn_prefill_backend
    if decode == BACKEND:
        raise ValueError(
            "--linear-attn-decode-backend qla: qla-serve has no GDN decode kernel; decode stays on "
            "SGLang's Triton kernel. Use --linear-attn-backend qla or --linear-attn-prefill-backend qla.")
    if BACKEND not in (base, prefill):
        return
    check_hooks_applied()
    if base != BACKEND:
        return
    fields: dict[str, str] = {"linear_attn_backend": "triton"}
    if prefill is None:
        fields["linear_attn_prefill_backend"] = BACKEND
    declare_resolution(server_args, "qla_serve", **fields)
    used = "runs GDN prefill (extend)" if prefill is None else f"is unused (prefill pinned to {prefill})"
    logger.info(
        "qla-serve: --linear-attn-backend qla %s; decode and target-verify stay on SGLang's Triton "
        "kernels (resolved as --linear-attn-backend triton --linear-attn-prefill-backend %s, so the "
        "radix cache's extra_buffer mode and the overlap scheduler are unaffected)",
        used, prefill or BACKEND)


# -- 2. kernel dispatcher -----------------------------------------------------------------------
def _requested() -> tuple[str | None, str | None]:
    """(decode, prefill) backend strings this process was configured with, or (None, None)."""
    try:
        from sglang.srt.runtime_context import get_exec

        mamba = get_exec().mamba
        base = mamba.linear_attn_backend
        return (mamba.linear_attn_decode_backend or base, mamba.linear_attn_prefill_backend or base)
    except Exception:  # no published config: nothing can have asked for qla
        return None, None


def dispatcher_init(original: Callable, self: Any, decode_backend: Any, prefill_backend: Any,
                    verify_backend: Any = None, *args: Any, **kwargs: Any) -> None:
    from sglang.srt.layers.attention.linear.utils import LinearAttnKernelBackend as KB

    decode_str, prefill_str = _requested()
    qla_prefill = prefill_backend.is_custom() and prefill_str == BACKEND
    if decode_backend.is_custom() and decode_str == BACKEND:
        decode_backend = KB.TRITON          # unreachable after resolve_flags; kept for safety
    if qla_prefill:
        prefill_backend = KB.TRITON
    original(self, decode_backend, prefill_backend, verify_backend, *args, **kwargs)
    if qla_prefill:
        from .kernel import QLAGDNKernel

        self.extend_kernel = QLAGDNKernel()
        logger.info("qla-serve: GDN extend=%s, decode=%s, verify=%s", type(self.extend_kernel).__name__,
                    type(self.decode_kernel).__name__, type(self.verify_kernel).__name__)
        notice = snapshot_notice()
        if notice:
            logger.warning(notice)


def snapshot_notice() -> str | None:
    """One start-up line when the radix cache's extra_buffer mode will push snapshot-taking prefill
    calls off the fastest qla-serve backend (it cannot write per-chunk states yet)."""
    try:
        from sglang.srt.runtime_context import get_exec

        if not get_exec().mamba.enable_mamba_extra_buffer:
            return None
        import torch

        from qla_serve import dispatch

        dev = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
        qk = torch.empty(0, 1, 128, device=dev, dtype=torch.bfloat16)
        probe = {"q": qk, "k": qk, "v": qk, "state_pool": torch.empty(1, 1, 128, 128, device=dev),
                 "checkpoints": None, "state_layout": "vk"}
        plain = next(b for b in dispatch.BACKENDS if b.why_not("prefill", probe) is None)
        why = plain.why_not("prefill", dict(probe, checkpoints=torch.empty(0, device=dev)))
    except Exception as exc:  # a notice must never stop start-up
        logger.debug("qla-serve: snapshot notice skipped (%r)", exc)
        return None
    if why is None:
        return None
    return (f"qla-serve: the radix cache's extra_buffer mode asks GDN prefill for state snapshots, and the "
            f"{plain.name} backend cannot write them ({why}): those prefill calls run on a slower qla-serve "
            f"backend; for full speed meanwhile use --mamba-radix-cache-strategy no_buffer (turns the overlap "
            f"scheduler off) or --linear-attn-prefill-backend triton")


# -- 3. host extend lengths ---------------------------------------------------------------------
def forward_extend(original: Callable, self: Any, layer: Any, forward_batch: Any, *args: Any,
                   **kwargs: Any) -> Any:
    from .kernel import QLAGDNKernel

    kernel = getattr(getattr(self, "kernel_dispatcher", None), "extend_kernel", None)
    if (not isinstance(kernel, QLAGDNKernel) or getattr(self, "mis_metadata", None) is not None
            or forward_batch.forward_mode.is_target_verify()):
        return original(self, layer, forward_batch, *args, **kwargs)
    lens = forward_batch.extend_seq_lens_cpu
    kernel.host_seqlens = lens.tolist() if hasattr(lens, "tolist") else lens
    try:
        return original(self, layer, forward_batch, *args, **kwargs)
    finally:
        kernel.host_seqlens = None


REGISTRY_HOOKS: tuple[tuple[str, Callable], ...] = (
    (DISPATCHER_INIT, dispatcher_init),
    (FORWARD_EXTEND, forward_extend),
)


def _wraps_hook(fn: Any, hook: Callable) -> bool:
    """Whether ``fn`` or a function it wraps (``__wrapped__`` chain) closes over ``hook``."""
    seen: set[int] = set()
    while fn is not None and id(fn) not in seen:
        seen.add(id(fn))
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                if cell.cell_contents is hook:
                    return True
            except ValueError:  # empty cell
                pass
        fn = getattr(fn, "__wrapped__", None)
    return False


def missing_hooks() -> list[str]:
    """Targets whose qla-serve hook is not installed right now, with the reason."""
    missing = []
    for target, hook in REGISTRY_HOOKS:
        try:
            fn = pkgutil.resolve_name(target)
        except Exception as exc:
            missing.append(f"{target} (cannot resolve: {exc!r})")
            continue
        if not _wraps_hook(fn, hook):
            missing.append(f"{target} (hook not applied)")
    return missing


def check_hooks_applied() -> None:
    missing = missing_hooks()
    if missing:
        raise RuntimeError(
            "qla-serve: SGLang did not apply qla-serve's hook(s) on " + "; ".join(missing)
            + ". SGLang only logs hook failures ('Failed to apply hooks to ...' above); refusing to "
            "start with a qla linear-attention backend. This qla-serve release targets SGLang 0.5.23.")
