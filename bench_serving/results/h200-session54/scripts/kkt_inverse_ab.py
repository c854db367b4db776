"""kkt_solve's two inverse forms on the GPU (session 54, not yet run): same outputs? how fast? and
how long does one warpgroup take for one value head's inverse?

    python bench_serving/results/h200-session54/scripts/kkt_inverse_ab.py --out OUT [--reps 200]

1. Outputs. For each head config and mix, kkt_solve "tl" and "warp" (kkt_solve.INVERSES) run on the
   same inputs (kernel_bench.make_inputs) into NaN-filled buffers. Compared: γ (must be bit-equal),
   Aβ on the blocks kkt_solve writes (kkt_solve.ABETA_PANEL: on and below the diagonal blocks of
   whole chunks, every column of a partial chunk's real rows), counted as bit-equal, equal up to the
   sign of a zero, or different (then the largest difference relative to max |Aβ|), and NaN left in
   a written element. tri_inverse promises kkt_solve's numbers; a few ulp here would be the tensor
   core summing a 16-term product where TileLang's gemm summed 32 terms with zeros.
2. Speed. kkt_solve alone, each form, CUDA events around ``--reps`` launches, medians of 5 rounds,
   on the issue-3 long rows where kkt_solve is a quarter of the call.
3. Latency of one value head. One wave of CTAs (one per SM, a single chunk each: H = 1, HV = G,
   ``heads_per_cta`` = G) for G = 1 and 8: the CTA walks its G value heads one after another, so
   (t(8) − t(1)) / 7 is one value head's L, inverse, Aβ staging and TMA store (with its wait) on an
   SM with a single CTA of this kernel. A walk that makes Aβ itself (FlashInfer's aux warpgroup;
   session 47 measured ~6 µs a chunk for the TileLang form inside the walk) pays the same minus
   the store's wait, plus K Kᵀ; the difference between the two forms is the inverse's alone.
Writes OUT/kkt_inverse_ab.json and prints a summary.
"""
import argparse
import json
import os
import statistics
import sys

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../../../.."))
sys.path.insert(0, os.path.join(ROOT, "bench_serving"))
from kernel_bench import SEQLENS, make_inputs, qla_plan  # noqa: E402

from qla_serve.kernels import hopper  # noqa: E402
from qla_serve.kernels.hopper import kkt_solve  # noqa: E402

C = 64


def kkt_for(H, HV, inverse, heads_per_cta=None):
    os.environ[hopper.KKT_INVERSE_ENV] = inverse
    try:
        return hopper.kkt_kernel(H, HV, 128, "bfloat16", False, (H * 128, HV, HV), heads_per_cta)
    finally:
        os.environ.pop(hopper.KKT_INVERSE_ENV, None)


def written_mask(cu, T):
    """[T, 64] bool: the Aβ elements kkt_solve writes (its lower 16-row blocks of whole chunks, all
    columns of a partial chunk's real rows)."""
    m = torch.zeros(T, C, dtype=torch.bool)
    blk = torch.arange(C)[:, None] // 16 >= torch.arange(C)[None, :] // 16
    for s, e in zip(cu[:-1], cu[1:]):
        for c0 in range(s, e, C):
            n = min(C, e - c0)
            m[c0:c0 + n] = blk[:n] if n == C else True
    return m


def compare(heads, mix, seqlens):
    H, HV = heads
    x = make_inputs(seqlens, H, HV)
    plan = qla_plan(x["cu_cpu"], "cuda")
    outs = {}
    for inv in kkt_solve.INVERSES:
        k = kkt_for(H, HV, inv, hopper.kkt_heads_per_cta(plan.num_chunks, H, HV, hopper._num_sms(x["k"].device)))
        gcum = torch.full((x["T"], HV), float("nan"), device="cuda")
        a = torch.full((x["T"], HV, C), float("nan"), device="cuda", dtype=torch.float16)
        k(x["k"], x["g"], x["beta"], plan.chunk_bounds, gcum, a)
        torch.cuda.synchronize()
        outs[inv] = (gcum.cpu(), a.cpu())
    (g0, a0), (g1, a1) = outs["tl"], outs["warp"]
    m = written_mask(x["cu_cpu"].tolist(), x["T"])[:, None, :].expand_as(a0)
    w0, w1 = a0[m], a1[m]
    bits0, bits1 = w0.view(torch.int16), w1.view(torch.int16)
    same = bits0 == bits1
    zero_sign = ~same & (w0 == 0) & (w1 == 0)
    diff = ~same & ~zero_sign
    rel = ((w0.float() - w1.float()).abs().max() / w0.float().abs().max()).item() if diff.any() else 0.0
    return {"heads": f"{H}/{HV}", "mix": mix, "gamma_bit_equal": bool(torch.equal(g0.view(torch.int32), g1.view(torch.int32))),
            "abeta_written": int(m.sum()), "bit_equal": int(same.sum()), "zero_sign_only": int(zero_sign.sum()),
            "different": int(diff.sum()), "max_rel_diff": rel,
            "nan_in_written": {"tl": int(torch.isnan(w0).sum()), "warp": int(torch.isnan(w1).sum())}}


def time_ms(fn, reps):
    fn()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(5):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(reps):
            fn()
        e1.record()
        torch.cuda.synchronize()
        rounds.append(e0.elapsed_time(e1) / reps)
    return statistics.median(rounds)


def speed(heads, mix, seqlens, reps):
    H, HV = heads
    x = make_inputs(seqlens, H, HV)
    plan = qla_plan(x["cu_cpu"], "cuda")
    gcum = torch.empty(x["T"], HV, device="cuda")
    a = torch.empty(x["T"], HV, C, device="cuda", dtype=torch.float16)
    hpc = hopper.kkt_heads_per_cta(plan.num_chunks, H, HV, hopper._num_sms(x["k"].device))
    row = {"heads": f"{H}/{HV}", "mix": mix}
    for inv in kkt_solve.INVERSES:
        k = kkt_for(H, HV, inv, hpc)
        row[f"{inv}_us"] = 1e3 * time_ms(lambda: k(x["k"], x["g"], x["beta"], plan.chunk_bounds, gcum, a), reps)
    row["warp_over_tl"] = row["warp_us"] / row["tl_us"]
    return row


def latency(reps):
    """One CTA per SM, one chunk each, G value heads walked one after another."""
    sms = hopper._num_sms(torch.device("cuda"))
    row = {"sms": sms}
    for inv in kkt_solve.INVERSES:
        t = {}
        for G in (1, 8):
            x = make_inputs([C] * sms, 1, G)                 # sms sequences of one whole chunk each
            plan = qla_plan(x["cu_cpu"], "cuda")
            gcum = torch.empty(x["T"], G, device="cuda")
            a = torch.empty(x["T"], G, C, device="cuda", dtype=torch.float16)
            k = kkt_for(1, G, inv, G)                         # all G heads in the chunk's one CTA
            t[G] = 1e3 * time_ms(lambda: k(x["k"], x["g"], x["beta"], plan.chunk_bounds, gcum, a), reps)
        row[inv] = {"G1_us": t[1], "G8_us": t[8], "per_head_us": (t[8] - t[1]) / 7}
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    res = {"gpu": torch.cuda.get_device_name(), "compare": [], "speed": [], "latency": None}
    for heads in ((16, 64), (16, 32), (2, 8)):
        for mix in ("1x8192", "7000+600+300+200+92", "64x128"):
            res["compare"].append(compare(heads, mix, SEQLENS[mix]))
            print("compare", json.dumps(res["compare"][-1]), flush=True)
    for heads in ((16, 64), (16, 32), (2, 8)):
        for mix in ("1x32768", "8192x4", "64x128"):
            res["speed"].append(speed(heads, mix, SEQLENS[mix], args.reps))
            print("speed", json.dumps(res["speed"][-1]), flush=True)
    res["latency"] = latency(args.reps)
    print("latency", json.dumps(res["latency"]), flush=True)
    with open(os.path.join(args.out, "kkt_inverse_ab.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
