"""``qla-serve demo``: random chunked-prefill traffic through :func:`gdn_prefill`, checked against the oracle.

A toy scheduler admits requests with random prompt lengths into a state pool, cuts them into
token-budget steps (so long prompts are prefilled over several calls, each continuing from the
state the previous call left in the pool), and times every call. At the end each request's
outputs and final state are compared with the fp64 token recurrence.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

import torch

from . import dispatch
from .api import gdn_prefill
from .plan import plan_prefill
from .reference import l2norm, pool_to_kv, token_recurrence


@dataclass
class _Request:
    rid: int
    length: int
    slot: int
    done: int = 0
    q: torch.Tensor | None = None
    k: torch.Tensor | None = None
    v: torch.Tensor | None = None
    g: torch.Tensor | None = None
    beta: torch.Tensor | None = None
    outs: list[torch.Tensor] = field(default_factory=list)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b).norm() / b.norm().clamp_min(1e-30))


def run_demo(*, requests: int = 24, max_len: int = 700, budget: int = 512, heads: tuple[int, int] = (2, 4),
             head_dim: int = 128, device: str = "cpu", dtype: torch.dtype = torch.bfloat16,
             pool_dtype: torch.dtype = torch.float32, seed: int = 0, progress: bool = True) -> dict:
    from tqdm import tqdm

    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    H, HV = heads
    dev = torch.device(device)
    slots = requests + 1  # slot 0 is the engine's null slot, as in vLLM
    pool = torch.randn(slots, HV, head_dim, head_dim, generator=gen).to(dev, pool_dtype)
    reqs = []
    for r in range(requests):
        n = rng.choice([1, rng.randint(2, 63), rng.randint(64, max_len)])
        req = _Request(rid=r, length=n, slot=r + 1)
        req.q = torch.randn(n, H, head_dim, generator=gen).to(dev, dtype)
        req.k = l2norm(torch.randn(n, H, head_dim, generator=gen)).to(dev, dtype)
        req.v = torch.randn(n, HV, head_dim, generator=gen).to(dev, dtype)
        req.g = (-torch.rand(n, HV, generator=gen) * 2).to(dev)
        req.beta = torch.rand(n, HV, generator=gen).to(dev)
        reqs.append(req)

    before = dispatch.calls.copy()
    waiting = list(reqs)
    timings: list[tuple[int, int, float]] = []
    bar = tqdm(total=sum(r.length for r in reqs), unit="tok", desc="prefill", disable=not progress)
    while waiting:
        # Scheduler step: fill the token budget, cutting the last request if needed (chunked prefill).
        batch, used = [], 0
        for req in waiting:
            if used >= budget:
                break
            take = min(req.length - req.done, budget - used)
            batch.append((req, take))
            used += take
        cu = [0]
        for _, take in batch:
            cu.append(cu[-1] + take)
        parts = [(req, req.done, req.done + take) for req, take in batch]
        cat = lambda name: torch.cat([getattr(r, name)[a:b] for r, a, b in parts])
        q, k, v, g, beta = (cat(n) for n in ("q", "k", "v", "g", "beta"))
        idx_cpu = torch.tensor([r.slot for r, _, _ in parts], dtype=torch.int32)
        has_init_cpu = torch.tensor([r.done > 0 for r, _, _ in parts])
        plan = plan_prefill(cu, device=dev, state_indices_cpu=idx_cpu, num_slots=slots, null_slot=0)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = gdn_prefill(q, k, v, g, beta, state_pool=pool, state_indices=idx_cpu.to(dev),
                          cu_seqlens=plan.cu_seqlens, has_initial_state=has_init_cpu.to(dev),
                          plan=plan, null_slot=0)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        timings.append((len(parts), used, time.perf_counter() - t0))
        for (req, a, b), lo, hi in zip(parts, cu[:-1], cu[1:]):
            req.outs.append(out[lo:hi].cpu())
            req.done = b
        waiting = [r for r in waiting if r.done < r.length]
        bar.update(used)
    bar.close()

    o_err, s_err = 0.0, 0.0
    for req in reqs:  # every request started from a zero state (has_initial_state False)
        ro, rs = token_recurrence(req.q, req.k, req.v, req.g, req.beta, [0, req.length])
        o_err = max(o_err, _rel(torch.cat(req.outs), ro))
        s_err = max(s_err, _rel(pool_to_kv(pool[req.slot], "vk").cpu(), rs[0]))
    total_s = sum(t for _, _, t in timings)
    used_backends = sorted(b for (op, b), n in (dispatch.calls - before).items() if op == "prefill")
    return {
        "backend": "+".join(used_backends), "device": str(dev), "heads": f"{H}/{HV}", "requests": requests,
        "steps": len(timings), "tokens": sum(u for _, u, _ in timings),
        "ms_per_step_p50": sorted(t for _, _, t in timings)[len(timings) // 2] * 1e3,
        "ms_total": total_s * 1e3, "tokens_per_s": sum(u for _, u, _ in timings) / max(total_s, 1e-9),
        "max_rel_err_o": o_err, "max_rel_err_state": s_err,
    }
