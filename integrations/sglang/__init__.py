"""SGLang plugin (entry point ``sglang.srt.plugins: qla``): GDN prefill on qla-serve.

    sglang serve --model-path Qwen/Qwen3-Next-80B-A3B-Instruct --linear-attn-backend qla
    sglang serve ... --linear-attn-prefill-backend qla      # same kernels, spelled per phase

Both route GDN extend (chunked prefill) through :func:`qla_serve.gdn_prefill` on SGLang's own
state pool, in place; decode and target-verify stay on SGLang's Triton kernels. Nothing changes
until one of those flags names ``qla``. Set ``SGLANG_PLUGINS`` to restrict which plugins load.
"""
from __future__ import annotations

import logging

logger = logging.getLogger("qla_serve.sglang")

_registered = False


def register() -> None:
    """Called by SGLang's ``load_plugins()`` in every process, before server flags are parsed."""
    global _registered
    if _registered:
        return
    from sglang.srt.arg_groups.choices import (
        LINEAR_ATTN_KERNEL_BACKEND_CHOICES,
        add_linear_attn_kernel_backend_choices,
    )
    from sglang.srt.arg_groups.resolution_hooks import register_resolution_hook
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    from . import hooks

    for target, hook in hooks.REGISTRY_HOOKS:
        HookRegistry.register(target, hook, HookType.AROUND)
    register_resolution_hook(hooks.RESOLUTION_STEP)(hooks.resolve_flags)
    # Last: if anything above raised, "qla" is never offered and the flag fails at parse time.
    if hooks.BACKEND not in LINEAR_ATTN_KERNEL_BACKEND_CHOICES:
        add_linear_attn_kernel_backend_choices([hooks.BACKEND])
    _registered = True
