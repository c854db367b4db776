"""Backend choice: the fastest backend that can take a call, with the reason for every refusal.

A backend answers ``why_not(op, call) -> str | None`` (``None`` = it can run the call), in words a
serving engineer can act on ("needs sm_90 (Hopper), got sm_80"). ``QLA_BACKEND`` forces one:
``reference``, ``tilelang`` or ``auto`` (default). Each fallback is logged once per reason.
"""
from __future__ import annotations

import functools
import importlib.util
import logging
import os
from collections import Counter
from typing import Any, Callable, Protocol

import torch

from . import reference

logger = logging.getLogger("qla_serve")

BACKEND_ENV = "QLA_BACKEND"
BACKEND_CHOICES = ("auto", "tilelang", "reference")


class Backend(Protocol):
    """``call``: the op's validated arguments; a prefill call also carries ``form``, a hashable key
    of everything the validation read apart from the token and sequence counts (None for calls
    off the plain form), which a backend may key per-form work on."""

    name: str

    def why_not(self, op: str, call: dict[str, Any]) -> str | None: ...

    def run(self, op: str, call: dict[str, Any]) -> None: ...


class ReferenceBackend:
    """Pure PyTorch, fp32 math, any device: always available."""

    name = "reference"

    def why_not(self, op: str, call: dict[str, Any]) -> str | None:
        return None

    def run(self, op: str, call: dict[str, Any]) -> None:
        fn: Callable[..., None] = {"prefill": reference.prefill_reference, "decode": reference.decode_reference,
                                   "gating": reference.gating_reference, "conv": reference.conv_reference}[op]
        fn(**{name: x for name, x in call.items() if name != "form"})   # form: a key for kernels' caches


class TileLangBackend:
    """Hopper (sm_90) TileLang kernels in ``kernels/hopper`` (installed as qla_serve.kernels.hopper)."""

    name = "tilelang"

    def why_not(self, op: str, call: dict[str, Any]) -> str | None:
        if op not in ("prefill", "gating", "conv"):
            return f"qla-serve has no TileLang {op} kernel yet"
        q = call[{"prefill": "q", "gating": "a", "conv": "x"}[op]]
        if q.device.type != "cuda":
            return f"needs a CUDA device, got {q.device.type}"
        index = q.device.index
        cc = _capability(torch.cuda.current_device() if index is None else index)
        if cc != (9, 0):
            return f"needs sm_90 (Hopper), got sm_{cc[0]}{cc[1]}"
        if not _tilelang_installed():
            return "tilelang is not installed (pip install 'qla-serve[tilelang]')"
        from .kernels import hopper

        return {"prefill": hopper.why_not, "gating": hopper.gating_why_not, "conv": hopper.conv_why_not}[op](call)

    def prepare(self, plan: Any, num_v_heads: int, head_v_dim: int) -> None:
        """The Hopper path's plan-only work, ahead of the call (see ``hopper.prepare_plan``);
        nothing where its kernels would not run."""
        dev = plan.device
        if dev.type != "cuda" or not _tilelang_installed():
            return
        if _capability(torch.cuda.current_device() if dev.index is None else dev.index) != (9, 0):
            return
        from .kernels import hopper

        hopper.prepare_plan(plan, num_v_heads, head_v_dim)

    def run(self, op: str, call: dict[str, Any]) -> None:
        from .kernels import hopper

        {"prefill": hopper.gdn_prefill_hopper, "gating": hopper.gdn_gating_hopper,
         "conv": hopper.gdn_conv_hopper}[op](**call)


# Both asked on every call (an engine asks once per layer per step): ``find_spec`` walks sys.path
# (~40 µs here), so each answer is kept for the process.
@functools.cache
def _capability(device_index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device_index)


@functools.cache
def _tilelang_installed() -> bool:
    return importlib.util.find_spec("tilelang") is not None


BACKENDS: tuple[Backend, ...] = (TileLangBackend(), ReferenceBackend())
_logged: set[tuple[str, str, str]] = set()
# (op, backend) → number of calls run in this process: lets tests and demos see which path ran.
calls: Counter[tuple[str, str]] = Counter()


def requested_backend() -> str:
    choice = os.environ.get(BACKEND_ENV, "auto").strip().lower() or "auto"
    if choice not in BACKEND_CHOICES:
        raise ValueError(f"{BACKEND_ENV}={choice!r}: expected one of {', '.join(BACKEND_CHOICES)}")
    return choice


def _log_once(op: str, backend: str, reason: str, chosen: str) -> None:
    key = (op, backend, reason)
    if key not in _logged:
        _logged.add(key)
        logger.warning("qla-serve: %s backend %s unavailable for this call (%s); using %s",
                       op, backend, reason, chosen)


def select(op: str, call: dict[str, Any]) -> Backend:
    """Pick the backend for ``op`` ("prefill", "decode", "gating" or "conv") given the validated call."""
    choice = requested_backend()
    if choice != "auto":
        backend = next(b for b in BACKENDS if b.name == choice)
        reason = backend.why_not(op, call)
        if reason is not None:
            raise RuntimeError(f"{BACKEND_ENV}={choice} cannot run this {op} call: {reason}")
        return backend
    refused: list[tuple[str, str]] = []
    for backend in BACKENDS:
        reason = backend.why_not(op, call)
        if reason is None:
            for name, why in refused:
                _log_once(op, name, why, backend.name)
            return backend
        refused.append((backend.name, reason))
    raise RuntimeError(f"no qla-serve backend can run this {op} call: {refused}")


def run(op: str, call: dict[str, Any]) -> str:
    backend = select(op, call)
    backend.run(op, call)
    calls[(op, backend.name)] += 1
    return backend.name


def prepare(plan: Any, num_v_heads: int, head_v_dim: int) -> None:
    """Let the backends that may run prefills on ``plan`` derive their tables from it now (host
    work only). Optional: a call on an unprepared plan does the same work itself. A backend that
    fails here is logged once and left to the call."""
    choice = requested_backend()
    for backend in BACKENDS:
        if choice != "auto" and backend.name != choice:
            continue
        prep = getattr(backend, "prepare", None)
        if prep is None:
            continue
        try:
            prep(plan, num_v_heads, head_v_dim)
        except Exception as exc:  # the call will meet the same problem and report it properly
            _log_once("prepare", backend.name, repr(exc), "the call itself")


def info_probe(device: torch.device, head_k_dim: int = 128, head_v_dim: int = 128) -> dict[str, Any]:
    """An empty call shaped like an engine's: bf16 activations (an fp32 probe made the Hopper
    kernel look refused on the H200), an fp32 pool."""
    return {
        "q": torch.empty(0, 1, head_k_dim, device=device, dtype=torch.bfloat16),
        "v": torch.empty(0, 1, head_v_dim, device=device, dtype=torch.bfloat16),
        "state_pool": torch.empty(1, 1, head_v_dim, head_k_dim, device=device),
        "checkpoints": None, "state_layout": "vk",
    }


def explain(device: torch.device, head_k_dim: int = 128, head_v_dim: int = 128) -> dict[str, dict[str, str]]:
    """For ``qla-serve info``: per op, per backend, "ok" or the reason it would be refused."""
    probe = info_probe(device, head_k_dim, head_v_dim)
    table: dict[str, dict[str, str]] = {}
    for op in ("prefill", "decode"):
        row = {}
        for backend in BACKENDS:
            try:
                reason = backend.why_not(op, probe)
            except Exception as exc:  # an info command must not crash on a half-installed kernel
                reason = f"check failed: {exc!r}"
            row[backend.name] = "ok" if reason is None else reason
        table[op] = row
    return table
