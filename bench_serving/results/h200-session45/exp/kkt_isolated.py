"""How long one kkt_solve CTA takes per chunk when it has the SM (nearly) to itself: the persistent
kkt_solve (branch exp/kkt-persist) with its grid capped at CTAS CTAs in all instead of 4 per SM.

Why: folding Aβ into the walk (an aux warpgroup that solves chunk c + 1 while the consumers walk
chunk c, FlashInfer's design) pays only if one warpgroup can produce a chunk's Aβ within the walk's
chunk step (~2.3 µs at V-block 128: session 43's 16/32 8192×4, ~0.30 ms of walk for 128 chunks).
kkt_solve's own profile cannot say: 4 CTAs share each SM there. With CTAS = 132 (one CTA per SM)
the time per chunk iteration is a CTA's latency for K Kᵀ plus G value heads' inverses (the next
chunk's K prefetched by TMA meanwhile); 264 and 528 show how much sharing hides.

    python kkt_isolated.py [--heads 16/32,16/64] [--ctas 132,264,528] [--tokens 32768] [--out FILE]
    python kkt_isolated.py --build-only ...     # compile only (no GPU: TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100)

Prints, per head config and grid cap: kkt_solve's median time (``kernel_bench.bench``), the
chunk iterations each CTA walks, µs per iteration and per (chunk, value head). Every cap's outputs
(a NaN-poisoned Aβ and γ) must equal the 528 cap's bit for bit: the grid only changes which CTA
solves a chunk.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import kernel_bench as kb  # noqa: E402

K = 128


def build(ks, hopper, H: int, HV: int, ctas: int):
    """The kkt_solve kernel of ``ks`` (a kkt_solve module with PERSIST_CTAS) with its grid capped at ``ctas``."""
    saved = ks.PERSIST_CTAS
    ks.PERSIST_CTAS = ctas
    try:
        # contiguous k [T, H, K], g and beta [T, HV]: the strides kernel_bench's inputs have
        prim = ks.build_kkt_solve(H, HV, K, "bfloat16", False, (H * K, HV, HV))
    finally:
        ks.PERSIST_CTAS = saved
    return hopper._compile(prim, ks.PASS_CONFIGS)


def poisoned(T_: int, HV: int, dev) -> tuple[torch.Tensor, torch.Tensor]:
    """γ [T, HV] and Aβ [T, HV, 64] outputs filled with NaN, so that an unwritten element shows."""
    return (torch.full((T_, HV), float("nan"), device=dev),
            torch.full((T_, HV, 64), float("nan"), dtype=torch.float16, device=dev))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heads", default="16/32,16/64")
    ap.add_argument("--ctas", default="132,264,528")
    ap.add_argument("--tokens", type=int, default=32768)
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args(argv)

    import qla_serve
    from qla_serve.kernels import hopper
    from qla_serve.kernels.hopper import kkt_solve as ks

    if not hasattr(ks, "PERSIST_CTAS"):
        print("kkt_isolated.py: this kkt_solve has no persistent grid (PERSIST_CTAS): run it on exp/kkt-persist",
              file=sys.stderr)
        return 2
    heads = [tuple(int(x) for x in h.split("/")) for h in args.heads.split(",")]
    caps = [int(x) for x in args.ctas.split(",")]
    T_ = args.tokens
    rows = []
    for H, HV in heads:
        kernels = {n: build(ks, hopper, H, HV, n) for n in caps}
        if args.build_only:
            print(f"{H}/{HV}: built caps {caps}")
            continue
        dev = torch.device("cuda", torch.cuda.current_device())
        x = kb.make_inputs([T_], H, HV)         # the kernel table's inputs (unit-norm k)
        k, g, beta = x["k"], x["g"], x["beta"]
        plan = qla_serve.plan_prefill(x["cu_cpu"], device=dev)
        nc = plan.num_chunks
        for n in caps:
            gcum, a = poisoned(T_, HV, dev)
            kern = kernels[n]
            t_us = kb.bench(lambda: kern(k, g, beta, plan.chunk_bounds, gcum, a)) * 1e3
            gx = min(nc, max(1, n // H))          # the grid's width along the chunks (S = 1 here)
            iters = math.ceil(nc / gx)
            rows.append({"heads": f"{H}/{HV}", "tokens": T_, "chunks": nc, "ctas_cap": n, "grid": [gx, H],
                         "kkt_us": t_us, "iters_per_cta": iters, "us_per_iter": t_us / iters,
                         "us_per_chunk_value_head": t_us / iters / (HV // H),
                         "finite": bool(torch.isfinite(a).all() and torch.isfinite(gcum).all()),
                         "gpu": torch.cuda.get_device_name()})
            print(json.dumps(rows[-1]), flush=True)
        # bit-identity against the widest cap, each on fresh NaN-poisoned outputs
        gref, aref = poisoned(T_, HV, dev)
        kernels[max(caps)](k, g, beta, plan.chunk_bounds, gref, aref)
        for n in caps:
            gc, ac = poisoned(T_, HV, dev)
            kernels[n](k, g, beta, plan.chunk_bounds, gc, ac)
            torch.cuda.synchronize()
            ok = torch.equal(gc, gref) and torch.equal(ac, aref)
            print(f"{H}/{HV} cap {n}: outputs equal the {max(caps)} cap's: {ok}")
            for r in rows:
                if r["heads"] == f"{H}/{HV}" and r["ctas_cap"] == n:
                    r["equal_to_widest"] = ok
        if args.out:        # after every head config: a call cut short keeps what it measured
            with open(args.out, "w") as f:
                json.dump({"command": " ".join(sys.argv), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
