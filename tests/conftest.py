"""Shared test helpers: fresh random GDN inputs, the oracle comparison, GPU skipping."""
from __future__ import annotations

import os
import sys
import zlib
from pathlib import Path

import pytest
import torch

# The checkout's root stays off sys.path in the tests: `python -m pytest` puts the working directory
# first, and the root's kernels/ folder (installed as qla_serve.kernels) would then shadow Hugging
# Face's `kernels` package, which transformers >= 5.25 imports (CI, 2026-12-03).
# Only where that folder exists: bench_serving/kernel_ab.sh runs these tests inside a copy of the
# package laid out as installed (qla_serve/kernels/, no root kernels/), and there the root must stay
# first so that the copy, not the editable install, is what gets tested (session 36: with the root
# dropped, an alternative kernel's tests silently ran the checkout's).
ROOT = Path(__file__).resolve().parents[1]
if (ROOT / "kernels").is_dir():
    sys.path[:] = [p for p in sys.path if Path(p or os.getcwd()).resolve() != ROOT]

from qla_serve.reference import l2norm, pool_to_kv, token_recurrence  # noqa: E402

# kernel_ab.sh names the package copy under test: anything else importing is an error, not a
# silently different result.
if os.environ.get("QLA_TEST_PACKAGE_ROOT"):
    import qla_serve.kernels  # noqa: E402

    _want = Path(os.environ["QLA_TEST_PACKAGE_ROOT"]).resolve()
    _got = Path(qla_serve.kernels.__file__).resolve()
    if not _got.is_relative_to(_want):
        raise pytest.UsageError(f"QLA_TEST_PACKAGE_ROOT={_want}, but qla_serve.kernels imports from {_got}")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none visible): run on the H200 with `-m gpu`")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def case_seed(tag: str, modulus: int = 1000) -> int:
    """A case's random seed from its name: the same inputs in every process (``hash(str)`` is salted
    per process), so two runs, or two kernels, can be compared case by case."""
    return zlib.crc32(tag.encode()) % modulus


def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    x, ref = x.detach().to("cpu", torch.float64), ref.detach().to("cpu", torch.float64)
    assert torch.isfinite(x).all(), "non-finite values (unwritten poison?)"
    return float((x - ref).norm() / ref.norm().clamp_min(1e-30))


def make_inputs(lens, H, HV, *, K=128, V=128, dtype=torch.bfloat16, device="cpu", gate_scale=2.0, seed=None,
                normalize_k=True):
    """Random varlen inputs (never zeros): q, k [T,H,K]; v [T,HV,V]; g ≤ 0, beta ∈ [0,1] fp32."""
    gen = torch.Generator().manual_seed(seed if seed is not None else torch.randint(0, 2**31, ()).item())
    T = sum(lens)
    q = torch.randn(T, H, K, generator=gen)
    k = torch.randn(T, H, K, generator=gen)
    if normalize_k:
        k = l2norm(k)
    v = torch.randn(T, HV, V, generator=gen)
    g = -torch.rand(T, HV, generator=gen) * gate_scale
    beta = torch.rand(T, HV, generator=gen)
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32)
    return (q.to(device, dtype), k.to(device, dtype), v.to(device, dtype), g.to(device), beta.to(device),
            cu.to(device))


def make_pool(slots, HV, *, K=128, V=128, layout="vk", dtype=torch.float32, device="cpu", row_stride_pad=0,
              seed=0):
    """Random pool; ``row_stride_pad`` > 0 makes it a strided view (like vLLM's conv+ssm pages)."""
    gen = torch.Generator().manual_seed(seed)
    inner = (HV, V, K) if layout == "vk" else (HV, K, V)
    n = inner[0] * inner[1] * inner[2]
    base = (torch.randn(slots, n + row_stride_pad, generator=gen) * 0.5).to(device=device, dtype=dtype)
    return base[:, :n].view(slots, *inner)


def oracle_for(q, k, v, g, beta, cu, pool, idx, has_init, *, layout="vk", null_slot=None, scale=None,
               use_qk_l2norm=False):
    """Oracle outputs and final states (math layout [N,HV,K,V]) for a pool-based call.

    Skipped sequences (negative or null slot) get zero output, as the op contract says."""
    N = len(idx)
    HV, Kd, Vd = v.shape[1], q.shape[-1], v.shape[-1]
    init = torch.zeros(N, HV, Kd, Vd, dtype=torch.float64)
    for i, (s, h) in enumerate(zip(idx, has_init)):
        if s >= 0 and s != null_slot and h:
            init[i] = pool_to_kv(pool[s], layout).double().cpu()
    o, finals = token_recurrence(q, k, v, g, beta, cu, init, scale=scale, use_qk_l2norm=use_qk_l2norm)
    for i, s in enumerate(idx):
        if s < 0 or s == null_slot:
            o[cu[i]:cu[i + 1]] = 0
    return o, finals
