"""How a vLLM run selects qla-serve, and the registry/CLI entries that let it say so.

Three spellings select qla-serve for the GDN prefill; :func:`qla_requested` reads them from the
engine's ``VllmConfig``:

* ``--attention-backend qla``: ``AttentionConfig.backend`` is the ``QLA`` member this module adds
  to ``AttentionBackendEnum``. For full-attention layers ``QLA`` means "the platform default": the
  platform's backend chooser sees ``None`` (auto) in its place.
* ``--gdn-prefill-backend qla``: vLLM copies the flag into ``additional_config`` (it wins over
  the JSON below). Its argparse choices are a fixed list, so ``qla`` is appended to that list
  after vLLM builds it.
* ``--additional-config '{"gdn_prefill_backend": "qla"}'``.

vLLM itself resolves the unknown name ``qla`` to its Triton/FLA prefill (CUDA) or its CPU kernel,
which is the path the adapter falls back to when qla-serve cannot take a call.
"""
from __future__ import annotations

import functools
import logging
from typing import Any

logger = logging.getLogger("qla_serve.vllm")

BACKEND_NAME = "QLA"          # AttentionBackendEnum member
GDN_PREFILL_NAME = "qla"      # --gdn-prefill-backend / additional_config value
# Not a usable attention backend class: full-attention layers never resolve QLA to a class,
# because the platform chooser receives None instead (see _map_qla_to_platform_default).
_PLACEHOLDER_PATH = "qla_serve.integrations.vllm.selection.QLAFullAttentionIsPlatformDefault"


class QLAFullAttentionIsPlatformDefault:
    """Placeholder class path of ``AttentionBackendEnum.QLA``.

    Full-attention layers selected with ``--attention-backend qla`` get the platform's default
    backend; vLLM should never need this class. It exists so that the enum member has a valid path.
    """


def _backend_enum():
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    return AttentionBackendEnum


def _qla_member():
    return _backend_enum().__members__.get(BACKEND_NAME)


def is_qla_backend(backend: Any) -> bool:
    member = _qla_member()
    return member is not None and backend is member


def _add_enum_member(enum_cls, name: str, value: str):
    """Add ``name`` to vLLM's backend enum (vLLM ≥ 0.27 has ``register``; 0.26 does not)."""
    if name in enum_cls.__members__:
        return enum_cls.__members__[name]
    register = getattr(enum_cls, "register", None)
    if callable(register):
        return register(name, value)
    member = object.__new__(enum_cls)
    member._name_ = name
    member._value_ = value
    member.__objclass__ = enum_cls
    type.__setattr__(enum_cls, name, member)
    enum_cls._member_map_[name] = member
    enum_cls._value2member_map_[value] = member
    enum_cls._member_names_.append(name)
    return member


def register_attention_backend():
    """Add ``AttentionBackendEnum.QLA`` and make the platform treat it as "auto" for full attention.

    Returns the member. vLLM may start its engine core with ``spawn`` and pickle the config, enum
    member included, before that process loads plugins; so the member pickles as a call to this
    function, which registers it in the new process first.
    """
    member = _add_enum_member(_backend_enum(), BACKEND_NAME, _PLACEHOLDER_PATH)
    if "__reduce_ex__" not in vars(member):
        member.__reduce_ex__ = _reduce_qla_member
    _map_qla_to_platform_default()
    return member


def _reduce_qla_member(protocol):
    return register_attention_backend, ()


def _map_qla_to_platform_default() -> None:
    """Wrap the platform's ``get_attn_backend_cls`` once: ``QLA`` → ``None`` (its own default).

    ``vllm.platforms.current_platform`` is resolved lazily by vLLM; resolving it probes the device
    through NVML/sysfs and does not initialise CUDA.
    """
    from vllm.platforms import current_platform

    platform_cls = type(current_platform)
    inner = platform_cls.get_attn_backend_cls.__func__  # a classmethod, possibly inherited
    if getattr(inner, "_qla_wrapped", False):
        return

    @functools.wraps(inner)
    def get_attn_backend_cls(cls, selected_backend, *args, **kwargs):
        if is_qla_backend(selected_backend):
            selected_backend = None  # full attention under --attention-backend qla: platform default
        return inner(cls, selected_backend, *args, **kwargs)

    get_attn_backend_cls._qla_wrapped = True
    platform_cls.get_attn_backend_cls = classmethod(get_attn_backend_cls)


def extend_gdn_prefill_choices() -> None:
    """Let ``--gdn-prefill-backend qla`` parse: append ``qla`` to the flag's fixed choices.

    vLLM builds its CLI in ``EngineArgs.add_cli_args`` right after loading plugins; we wrap that
    static method so the choice is added to the parser it returns. Processes that never import
    the CLI (engine core, workers) are left alone.
    """
    import sys

    arg_utils = sys.modules.get("vllm.engine.arg_utils")
    if arg_utils is None:
        return
    engine_args = arg_utils.EngineArgs
    current = engine_args.__dict__.get("add_cli_args")
    inner = current.__func__ if isinstance(current, staticmethod) else current
    if inner is None or getattr(inner, "_qla_wrapped", False):
        return

    @functools.wraps(inner)
    def add_cli_args(parser, *args, **kwargs):
        parser = inner(parser, *args, **kwargs)
        add_gdn_prefill_choice(parser)
        return parser

    add_cli_args._qla_wrapped = True
    engine_args.add_cli_args = staticmethod(add_cli_args)


def add_gdn_prefill_choice(parser) -> bool:
    """Append ``qla`` to the ``--gdn-prefill-backend`` choices of an argparse parser (idempotent)."""
    for action in getattr(parser, "_actions", ()):
        if "--gdn-prefill-backend" in getattr(action, "option_strings", ()):
            if action.choices is not None and GDN_PREFILL_NAME not in action.choices:
                action.choices = [*action.choices, GDN_PREFILL_NAME]
                if action.help and GDN_PREFILL_NAME not in action.help:
                    action.help += " 'qla': qla-serve (plugin)."
            return True
    return False


def requested_gdn_prefill_backend(vllm_config) -> str | None:
    extra = getattr(vllm_config, "additional_config", None)
    if isinstance(extra, dict) and extra.get("gdn_prefill_backend") is not None:
        return str(extra["gdn_prefill_backend"]).strip().lower()
    return None


def qla_requested(vllm_config) -> bool:
    """True when this run asks for qla-serve's GDN prefill (see the module docstring)."""
    gdn = requested_gdn_prefill_backend(vllm_config)
    if gdn is not None and gdn != "auto":
        return gdn == GDN_PREFILL_NAME
    attention_config = getattr(vllm_config, "attention_config", None)
    return is_qla_backend(getattr(attention_config, "backend", None))
