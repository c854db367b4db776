"""Per-step wall time of the GDN core on steps that carry prefill tokens (benchmarks only).

``QLA_VLLM_STEP_TIMING=/path/file``: each worker appends one JSON line per forward step in which
its GDN layers saw prefill tokens, for whichever path ran them (``qla`` or vLLM's own, so the
``auto`` / ``triton`` baselines are timed the same way)::

    {"pid", "backend", "step", "t", "gdn_ms", "layers", "prefills", "prefill_tokens",
     "decode_tokens", "step_ms", ...notes}

* ``gdn_ms``: sum over the step's GDN layers of the time inside the layer's core (causal conv,
  gates (and q/k/v prep) and the chunked recurrence, plus the step's decode tokens when the step mixes
  them) — the part a GDN prefill kernel can move. CPU: ``time.perf_counter``; CUDA: a pair of
  CUDA events per layer, read later with ``Event.query()`` (no synchronisation added).
* ``host_ms``: host time the same layer cores took to enqueue their work (``perf_counter``). Where
  it is close to ``gdn_ms`` the GPU was waiting for the host: the step is launch-bound, and a
  faster kernel cannot show there.
* ``layer_ms`` / ``layer_host_ms``: the same two figures per GDN layer, in call order. A layer whose
  GPU found nothing queued ahead of it (the step's first, when the host is not ahead) reads its
  host time; the others read their kernels' time.
* ``layer_cpu_ms``: the CPU time the calling thread itself spent in each layer's core
  (``time.thread_time``). Host ms well above it is time the thread waited: for the GIL (vLLM's
  engine process runs its socket threads beside the forward) or for the OS.
* ``layer_pieces_ms`` (qla only): per layer, the host ms of each piece the core marks with
  :meth:`StepTimer.lap` (``conv``: from the core's start through the causal conv, the adapter's
  checks included; ``op``: the inputs and ``gdn_prefill``).
* ``t``: ``time.time()`` at the step's first GDN layer (the runner assigns steps to workloads);
  ``step_ms``: interval from this step's first GDN layer to the next step's first GDN layer. In
  eager mode that is the engine's step time (forward + scheduling); steps replayed as full CUDA
  graphs (decode-only batches) never enter Python, so there it can span them (read it as an
  upper bound).
* notes (``note``): host time spent before the step's layers, e.g. by qla-serve's metadata
  builder: ``builder_ms`` (vLLM's own GDN builder) and ``qla_builder_ms`` (the plan and tables
  qla-serve adds). They are attached to the step that follows.

A line is written once its step has ended and its events are complete: the last step of a run
stays pending until another step runs (the benchmark runner sends a 1-token request for that).
No math here; nothing runs unless the variable is set.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any

import torch

ENV = "QLA_VLLM_STEP_TIMING"


class StepTimer:
    def __init__(self, path: str):
        self.path = path
        self.step = 0
        self.seen: set[str] = set()
        self.cur: dict[str, Any] | None = None      # step in progress
        self.pending: list[dict[str, Any]] = []      # ended, waiting for their CUDA events
        self.notes: dict[str, float] = {}            # for the next step (see note)
        self._lap_t: float | None = None             # last lap mark inside run(), else None
        self._pieces: dict[str, float] = {}

    def note(self, key: str, ms: float) -> None:
        """Host time spent before the next step's GDN layers (its metadata build)."""
        self.notes[key] = self.notes.get(key, 0.0) + ms

    # Called for every GDN layer call that has metadata (decode-only steps too: they mark steps).
    def mark(self, prefix: str) -> None:
        if prefix in self.seen or not self.seen:
            now = time.time()
            if self.cur is not None:
                self.cur["step_ms"] = (now - self.cur["t"]) * 1e3
                if self.cur["parts"]:
                    self.pending.append(self.cur)
            self.step += 1
            self.seen = set()
            self.cur = {"t": now, "step": self.step, "parts": [], "notes": self.notes}
            self.notes = {}
            self._flush()
        self.seen.add(prefix)

    def lap(self, name: str) -> None:
        """Inside :meth:`run`: host ms since the core started or since the last lap, as ``name``."""
        if self._lap_t is None:
            return
        now = time.perf_counter()
        self._pieces[name] = round((now - self._lap_t) * 1e3, 4)
        self._lap_t = now

    def run(self, backend: str, md, fn, *args) -> None:
        """Run ``fn(*args)`` (one layer's core on a step with prefills) and time it."""
        cur = self.cur
        events = None
        self._pieces = {}
        # The wall interval encloses the CPU one (read in nested order), so cpu_ms ≤ host_ms holds
        # whatever the clock reads cost (a VM's thread_time can take tens of µs).
        t0 = self._lap_t = time.perf_counter()
        c0 = time.thread_time()
        try:
            if args and args[0].is_cuda:
                events = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                events[0].record()
                fn(*args)
                events[1].record()
            else:
                fn(*args)
        finally:
            self._lap_t = None
        cpu_ms = (time.thread_time() - c0) * 1e3
        host_ms = (time.perf_counter() - t0) * 1e3
        part: Any = events if events is not None else host_ms   # CPU: the core's time is the host's
        if cur is None:
            return
        cur["parts"].append(part)
        cur["host_ms"] = cur.get("host_ms", 0.0) + host_ms
        cur.setdefault("layer_host_ms", []).append(round(host_ms, 4))
        cur.setdefault("layer_cpu_ms", []).append(round(cpu_ms, 4))
        if self._pieces:
            cur.setdefault("layer_pieces_ms", []).append(self._pieces)
        cur.setdefault("backend", backend)
        cur.setdefault("prefills", int(md.num_prefills))
        cur.setdefault("prefill_tokens", int(md.num_prefill_tokens))
        cur.setdefault("decode_tokens", int(md.num_decode_tokens))

    def _flush(self) -> None:
        keep = []
        for rec in self.pending:
            parts = rec["parts"]
            if any(not isinstance(p, float) and not p[1].query() for p in parts):
                keep.append(rec)
                continue
            layer_ms = [p if isinstance(p, float) else p[0].elapsed_time(p[1]) for p in parts]
            line = {"pid": os.getpid(), "backend": rec.get("backend"), "step": rec["step"], "t": rec["t"],
                    "gdn_ms": sum(layer_ms), "layers": len(parts),
                    "layer_ms": [round(x, 4) for x in layer_ms], "layer_host_ms": rec.get("layer_host_ms"),
                    "layer_cpu_ms": rec.get("layer_cpu_ms"),
                    **({"layer_pieces_ms": rec["layer_pieces_ms"]} if "layer_pieces_ms" in rec else {}),
                    "prefills": rec.get("prefills"),
                    "prefill_tokens": rec.get("prefill_tokens"), "decode_tokens": rec.get("decode_tokens"),
                    "step_ms": rec["step_ms"], "host_ms": rec.get("host_ms"), **rec.get("notes", {})}
            with open(self.path, "a") as f:
                f.write(json.dumps(line) + "\n")
        self.pending = keep


_timer: StepTimer | None = None


def timer() -> StepTimer | None:
    """The process's timer when ``QLA_VLLM_STEP_TIMING`` is set, else None."""
    global _timer
    path = os.environ.get(ENV)
    if not path:
        return None
    if _timer is None or _timer.path != path:
        _timer = StepTimer(path)
    return _timer
