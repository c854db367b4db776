"""vLLM plugin: route the Qwen Gated DeltaNet prefill through qla-serve.

Loaded by vLLM in every process through the ``vllm.general_plugins`` entry point ``qla``.
Nothing changes until a run selects it, with any one of::

    vllm serve MODEL --attention-backend qla
    vllm serve MODEL --gdn-prefill-backend qla
    vllm serve MODEL --additional-config '{"gdn_prefill_backend": "qla"}'

``--attention-backend qla`` keeps the platform's default backend for the full-attention layers
(qla-serve has no full-attention kernel); it only turns the GDN layers to qla-serve. An explicit
``--gdn-prefill-backend`` other than ``qla`` wins over it.

What :func:`register` does (idempotent; imports vLLM lazily; never initialises CUDA):

* adds ``QLA`` to vLLM's attention backend registry and maps it to the platform default for
  full-attention layers (``selection.py``);
* adds ``qla`` to the choices of ``--gdn-prefill-backend`` (``selection.py``);
* registers :class:`~qla_serve.integrations.vllm.layer.QLAGatedDeltaNetAttention` as the
  out-of-tree replacement of vLLM's ``QwenGatedDeltaNetAttention``; unselected, it is vLLM's layer
  unchanged (``layer.py``).
"""
from __future__ import annotations

import logging

logger = logging.getLogger("qla_serve.vllm")

#: vLLM releases this adapter was written against (their GDN layer, metadata and registry share one
#: structure): 0.26.0 (the H200 image's torch 2.11) through 0.33.x. Tested end to end: 0.32.0 (CPU).
SUPPORTED_VLLM = ("0.26.0", "0.34.0")  # [low, high)
SUPPORTED_RANGE_TEXT = "vLLM >= 0.26.0, < 0.34.0"

_registered = False


class UnsupportedVLLMVersion(RuntimeError):
    """The installed vLLM is outside :data:`SUPPORTED_VLLM`."""


def vllm_version() -> str:
    """The installed vLLM version string (``0.32.0+cpu`` for the CPU build's shim)."""
    import importlib.metadata

    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        import vllm  # the CPU repackaging may lack the distribution name; its module knows

        return getattr(vllm, "__version__", "unknown")


def check_vllm_version(version: str | None = None) -> str:
    """Return the version if supported, else raise :class:`UnsupportedVLLMVersion` naming the range."""
    from packaging.version import InvalidVersion, Version

    version = vllm_version() if version is None else version
    try:
        v = Version(version).release
    except InvalidVersion:
        v = None
    low, high = (Version(x).release for x in SUPPORTED_VLLM)
    if v is None or not (low <= v < high):
        raise UnsupportedVLLMVersion(
            f"qla-serve's vLLM plugin supports {SUPPORTED_RANGE_TEXT}; found vLLM {version}. "
            "Install a supported vLLM, or run vLLM without this plugin "
            "(VLLM_PLUGINS set to a list without 'qla', or pip uninstall qla-serve)."
        )
    return version


def register() -> None:
    """Entry point for ``vllm.general_plugins`` (called once or more per vLLM process)."""
    global _registered
    if _registered:
        return
    check_vllm_version()
    from . import layer, selection

    selection.register_attention_backend()
    selection.extend_gdn_prefill_choices()
    layer.register_layer()
    _registered = True
    logger.debug("qla-serve vLLM plugin registered (vLLM %s)", vllm_version())


__all__ = ["register", "check_vllm_version", "vllm_version", "SUPPORTED_VLLM", "UnsupportedVLLMVersion"]
