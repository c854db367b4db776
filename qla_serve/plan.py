"""Host-side planning: everything a prefill call needs that depends on sequence lengths.

A plan is built from CPU metadata the scheduler already holds (``cu_seqlens`` on the host, and
optionally the slot indices on the host). Building it may copy small tables host→device (async);
it never reads device memory. A call that receives a plan therefore performs no device→host sync.
The host work of a batch shape (validation, tables, the backends' choices) is kept per shape in
small LRU caches (:func:`clear_host_caches`), and so are the tables' device copies (read-only:
plans of one shape share them, :meth:`StagedInt32.shared_to`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

CHUNK_SIZE = 64


@dataclass(frozen=True)
class PrefillPlan:
    """Sequence-length-dependent metadata for one prefill batch.

    Host fields (plain Python / CPU tensors) are what validation and backends read; device fields
    are copies for kernels. Every tensor field is shared by the plans of one batch shape (on one
    device and stream): read only. ``kernel_data`` is where a backend keeps its own tables (CP partitions,
    variant choice) so that a call with this plan needs no further host work.
    """

    seqlens: tuple[int, ...]             # per sequence, host
    cu_seqlens_cpu: torch.Tensor         # [N+1] int32, CPU (shared by the plans of one batch shape: read only)
    chunk_offsets_cpu: torch.Tensor      # [N+1] int32, CPU: first global chunk of each sequence (read only)
    total_tokens: int
    num_chunks: int
    max_seqlen: int
    device: torch.device
    cu_seqlens: torch.Tensor             # [N+1] int32 on `device`
    chunk_offsets: torch.Tensor          # [N+1] int32 on `device`
    # [num_chunks, 4] int32 on `device`, per chunk: its first token, its sequence's end, its sequence's
    # start, the sequence (kernels over chunks read their bounds in one row, no further lookup)
    chunk_bounds: torch.Tensor
    seq_order: torch.Tensor              # [N] int32 on `device`: sequences longest first (ties in order)
    checked_indices: bool = False        # state indices were range/duplicate-checked on the host
    unit_norm_keys: bool = False         # the calls' keys reach the kernels l2-normalised (see plan_prefill)
    chunk_size: int = CHUNK_SIZE
    kernel_data: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def num_seqs(self) -> int:
        return len(self.seqlens)


def _as_cpu_int_list(name: str, x: torch.Tensor | Sequence[int]) -> list[int]:
    if isinstance(x, torch.Tensor):
        if x.device.type != "cpu":
            raise ValueError(
                f"{name} must be a CPU tensor for planning (got device {x.device}); "
                "pass the scheduler's host copy, planning never reads device memory"
            )
        if x.dtype.is_floating_point or x.dtype == torch.bool:
            raise TypeError(f"{name} must hold integers, got {x.dtype}")
        if x.dim() != 1:
            raise ValueError(f"{name} must be 1-D, got shape {tuple(x.shape)}")
        return [int(v) for v in x.tolist()]
    return [int(v) for v in x]


def check_slot_indices(indices: Sequence[int], num_slots: int, null_slot: int | None) -> None:
    """Raise ValueError for a slot out of range or one slot shared by two live sequences.

    Negative indices and ``null_slot`` mark sequences to skip and may repeat.
    """
    seen: dict[int, int] = {}
    for i, s in enumerate(indices):
        if s < 0 or (null_slot is not None and s == null_slot):
            continue
        if s >= num_slots:
            raise ValueError(
                f"state_indices[{i}] = {s} is out of range for state_pool with {num_slots} slots"
            )
        if s in seen:
            raise ValueError(
                f"state_indices: slot {s} is given to sequences {seen[s]} and {i}; "
                "two live sequences cannot share one recurrent state"
            )
        seen[s] = i


def plan_prefill(
    cu_seqlens_cpu: torch.Tensor | Sequence[int],
    *,
    device: torch.device | str | None = None,
    state_indices_cpu: torch.Tensor | Sequence[int] | None = None,
    num_slots: int | None = None,
    null_slot: int | None = None,
    chunk_size: int = CHUNK_SIZE,
    num_v_heads: int | None = None,
    head_v_dim: int = 128,
    unit_norm_keys: bool = False,
) -> PrefillPlan:
    """Build a :class:`PrefillPlan` from host-side sequence boundaries.

    Args:
        cu_seqlens_cpu: ``[N+1]`` cumulative token offsets on the host, starting at 0.
        device: where the kernel tables go (default: CPU).
        state_indices_cpu: optional host copy of the slot indices; with ``num_slots`` the plan
            checks ranges and duplicates here so that the call itself reads nothing back.
        num_slots: number of rows of the state pool (needed with ``state_indices_cpu``).
        null_slot: the engine's "no state" slot (vLLM: 0), skipped like negative indices.
        num_v_heads, head_v_dim: the value heads (per rank) and their width of the layers that
            will run on this plan. Given, the backend that will run the calls derives its own
            tables now (variant choice, context-parallel partitions) instead of in the first call:
            an engine builds the plan once per step, before the forward, and its first GDN layer
            then pays no planning.
        unit_norm_keys: the calls on this plan hand ``k`` already l2-normalised (an engine's conv
            or norm did it; a call with ``use_qk_l2norm=True`` says so itself). The Hopper path's
            context parallelism may then start a partition from its last decayed chunks, exact to
            fp32 (``kernels/hopper/cp.py``, "Tail starts"). Wrong keys would make that inexact:
            pass it only when it holds.
    """
    if num_v_heads is not None and (not isinstance(num_v_heads, int) or num_v_heads <= 0):
        raise ValueError(f"num_v_heads must be a positive int, got {num_v_heads!r}")
    cu = _as_cpu_int_list("cu_seqlens", cu_seqlens_cpu)
    dev = torch.device(device) if device is not None else torch.device("cpu")
    if dev.type == "cuda" and dev.index is None:
        # Tensors report "cuda:0", never bare "cuda": pin the index so device checks compare equal.
        dev = torch.device("cuda", torch.cuda.current_device())
    host = _host_tables(tuple(cu), chunk_size, dev.type == "cuda")
    seqlens = host.seqlens
    checked = False
    if state_indices_cpu is not None:
        idx = _as_cpu_int_list("state_indices", state_indices_cpu)
        if len(idx) != len(seqlens):
            raise ValueError(
                f"state_indices has {len(idx)} entries but cu_seqlens describes {len(seqlens)} sequences"
            )
        if num_slots is None:
            raise ValueError("num_slots is required with state_indices_cpu")
        check_slot_indices(idx, num_slots, null_slot)
        checked = True
    cu_d, off_d, tab_d, order_d = host.staged.shared_to(dev)
    plan = PrefillPlan(
        seqlens=seqlens,
        cu_seqlens_cpu=host.cu_seqlens_cpu,
        chunk_offsets_cpu=host.chunk_offsets_cpu,
        total_tokens=cu[-1],
        num_chunks=host.num_chunks,
        max_seqlen=max(seqlens) if seqlens else 0,
        device=dev,
        cu_seqlens=cu_d,
        chunk_offsets=off_d,
        chunk_bounds=tab_d.view(-1, 4),
        seq_order=order_d,
        checked_indices=checked,
        unit_norm_keys=bool(unit_norm_keys),
        chunk_size=chunk_size,
    )
    if num_v_heads is not None:
        from . import dispatch

        dispatch.prepare(plan, num_v_heads, head_v_dim)
    return plan


# Host-side caches keyed by batch shape (this module's and the backends'): clear_host_caches()
# empties them all, e.g. to time a cold plan (bench_serving/host_profile.py's "fresh_cold").
HOST_CACHES: list = []


def clear_host_caches() -> None:
    """Forget every host table and choice kept per batch shape (see :func:`_host_tables`)."""
    for cache in HOST_CACHES:
        cache.cache_clear()


@dataclass(frozen=True)
class _HostTables:
    """What a plan derives from ``cu_seqlens`` alone, on the host (see :func:`_host_tables`)."""

    seqlens: tuple[int, ...]
    num_chunks: int
    cu_seqlens_cpu: torch.Tensor         # shared by every plan of this batch shape: read-only by contract
    chunk_offsets_cpu: torch.Tensor
    staged: "StagedInt32"                # cu_seqlens, chunk_offsets, chunk_bounds, seq_order


@functools.lru_cache(maxsize=256)
def _host_tables(cu: tuple[int, ...], chunk_size: int, pinned: bool) -> _HostTables:
    """Validation and host tables of one batch shape, kept per ``cu_seqlens``: a serving engine's
    batches repeat their shapes (every 8192-token chunk of a long prompt; the same decode mix), and
    these are a pure function of it (session 28: plan_prefill 41 → ~12 µs on the CPU machine for
    1×8192). Their device copies are kept too, per device and stream (:meth:`StagedInt32.shared_to`)."""
    if len(cu) < 2:
        raise ValueError(f"cu_seqlens must hold at least 2 entries ([0, T]), got {len(cu)}")
    if cu[0] != 0:
        raise ValueError(f"cu_seqlens must start at 0, got {cu[0]}")
    # The tables with numpy: building the [chunks, 4] table as a Python list of tuples cost 119 µs
    # for 1×32768 and 182 µs for 256×1+4096 against 43 and 54 µs this way (CPU machine).
    cu_np = np.asarray(cu, dtype=np.int64)
    lens = np.diff(cu_np)
    if (lens < 0).any():
        i = int(np.argmax(lens < 0))
        raise ValueError(
            f"cu_seqlens must be non-decreasing: cu_seqlens[{i + 1}] = {cu[i + 1]} < "
            f"cu_seqlens[{i}] = {cu[i]}"
        )
    nchunks = (lens + chunk_size - 1) // chunk_size
    offsets = np.zeros(len(cu), dtype=np.int64)
    np.cumsum(nchunks, out=offsets[1:])
    chunk_in_seq = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1], nchunks)
    starts = np.repeat(cu_np[:-1], nchunks)
    table = np.stack([starts + chunk_in_seq * chunk_size, np.repeat(cu_np[1:], nchunks), starts,
                      np.repeat(np.arange(len(lens), dtype=np.int64), nchunks)], axis=1)
    cu32, off32 = cu_np.astype(np.int32), offsets.astype(np.int32)
    # Longest first: a kernel that deals sequences out to a fixed set of CTAs starts the long ones
    # first (the Hopper walk's persistent form).
    order = np.argsort(-lens, kind="stable")
    return _HostTables(seqlens=tuple(lens.tolist()), num_chunks=int(offsets[-1]),
                       cu_seqlens_cpu=torch.from_numpy(cu32), chunk_offsets_cpu=torch.from_numpy(off32),
                       staged=StagedInt32.pack([cu32, off32, table, order], pinned))


HOST_CACHES.append(_host_tables)


_STAGE_ALIGN = 4        # int32 elements: every table starts 16-byte aligned in the staged buffer


@dataclass(frozen=True)
class StagedInt32:
    """Integer tables packed into ONE int32 host buffer (pinned for CUDA), each 16-byte aligned, so
    that a device copy of all of them is ONE async copy (:meth:`to`). A pinned copy per table cost
    roughly 40 µs of the H200 host's time each (session 5–7 host profiles). The buffer is never
    written after :meth:`pack`, so one packing may feed any number of copies (kept per batch shape
    by the plan's and the CP tables' caches)."""

    buf: torch.Tensor
    sizes: tuple[int, ...]              # (table, its padding) pairs: one split yields every view
    # device copies kept by shared_to(): (device, stream) → views
    _shared: dict = field(default_factory=dict, compare=False, repr=False)

    @staticmethod
    def pack(tables: Sequence[np.ndarray | Sequence[int]], pinned: bool) -> "StagedInt32":
        flat = [np.asarray(t, dtype=np.int32).reshape(-1) for t in tables]
        sizes = []
        for f in flat:
            sizes += (f.size, -f.size % _STAGE_ALIGN)
        total = sum(sizes)
        buf = torch.empty(max(1, total), dtype=torch.int32, pin_memory=pinned)
        host = buf.numpy()
        o = 0
        for f, pad in zip(flat, sizes[1::2]):
            host[o:o + f.size] = f
            o += f.size + pad
        return StagedInt32(buf, tuple(sizes))

    def to(self, device: torch.device) -> list[torch.Tensor]:
        """Flat int32 tensors on ``device`` (views into one new buffer there), one async copy, no sync:
        a pinned block stays reserved until the copy has run (torch's caching host allocator records
        the copy on its stream)."""
        total = sum(self.sizes)
        dev_buf = (self.buf.to(device, non_blocking=True) if device.type == "cuda"
                   else self.buf.to(device, copy=True))     # on the CPU too: a plan's own tables
        if dev_buf.numel() != total:        # the 1-element buffer of an all-empty call
            dev_buf = dev_buf[:total]
        return list(dev_buf.split(self.sizes)[0::2])

    def shared_to(self, device: torch.device) -> list[torch.Tensor]:
        """:meth:`to`, kept: the first call per device (and CUDA stream) copies, later ones return
        the same views, so that a new plan of a batch shape seen before makes no copy and no split
        (session 32's host profile of a fresh CP call: the two copies ~41 µs, their split into views
        ~27 µs of the H200 host's time). The tables are a pure function of the shape and nothing
        writes them (read-only by contract, like ``cu_seqlens_cpu``). Keyed by stream: a plan used on
        another stream gets its own copy, ordered on that stream. Never kept while a CUDA graph is
        being captured: a copy recorded into the graph is only filled when the graph replays."""
        if device.type == "cuda":
            if torch.cuda.is_current_stream_capturing():
                return self.to(device)
            key = _stream_key(device)
        else:
            key = (device.type, device.index)
        got = self._shared.get(key)
        if got is None:
            got = self._shared[key] = self.to(device)
        return got


def _current_stream_public(index: int) -> int:
    return torch.cuda.current_stream(index).cuda_stream


# torch's own raw-stream query (what TorchInductor's generated code calls): the public
# torch.cuda.current_stream() normalises its argument and builds a Stream object; for the two keys a
# fresh CP call needs, 25–31 µs of the H200 host's time under cProfile (session 37, profiler
# overhead included).
_current_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or _current_stream_public


def _stream_key(device: torch.device) -> tuple[int, int]:
    """(device index, raw handle of its current CUDA stream): where :meth:`StagedInt32.shared_to`
    keeps a device copy."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    return index, _current_raw_stream(index)


def stage_int32(tables: Sequence[np.ndarray | Sequence[int]], device: torch.device) -> list[torch.Tensor]:
    """Host integer tables (arrays or lists) → flat int32 tensors on ``device``, through one buffer
    and one async copy (:class:`StagedInt32`)."""
    return StagedInt32.pack(tables, device.type == "cuda").to(device)
