"""CPU emulation of kkt_solve's merge precision (tests/test_kkt_scheme.py's scheme, step for step),
with each of the four merge products in one of these forms (hi/lo: the bf16 head of an fp32 value
and the bf16 rounding of its remainder; fp32 accumulation):
    3   A_hi B_hi + A_hi B_lo + A_lo B_hi   (the checkout: three tensor-core passes)
    2a  A_hi B_hi + A_lo B_hi               (B's head only)
    2b  A_hi B_hi + A_hi B_lo               (A's head only)
    1   A_hi B_hi
    t   both operands rounded to tf32 (10 mantissa bits, to nearest, ties away), one product: FLA
        0.6.0's fused kkt_solve on the H200 (chunk_fwd.py: SOLVE_TRIL_DOT_PRECISION = 'tf32' where
        TF32 is supported), here in this scheme's product order
The products are P1 = L·X, X·P1, P2 = L·X, X·P2 (kkt_solve.py, steps 2 and 3). "X-hi"
(kkt_solve_xhi.py) is (2a, 2b, 2a, 2b): every X block enters a product as its bf16 head only.
Prints (1) the worst relative error of X and, what leaves the kernel, of Aβ = X·diag(β) rounded to
bf16, against the fp64 triangular solve, over 30 chunks (the test's gate ranges, correlated keys,
partial chunks); (2) the relative L2 error of o through 1000 tokens of the chunked recurrence, in fp64
except for Aβ (each scheme's, in bf16), against the fp64 token recurrence: the part of o's error
that Aβ's precision causes (the GPU adds its other bf16 roundings on top).

    .venv/bin/python bench_serving/results/h200-session35/exp/kkt_scheme_xhi.py
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))
import test_kkt_scheme as m  # noqa: E402

C, B = 64, 16


def tf32(x):
    bits = x.contiguous().view(torch.int32)
    return ((bits + 0x1000) & -0x2000).view(torch.float32)     # round the 13 dropped bits, ties away


def product(a, b, form):
    if form == "t":
        return tf32(a) @ tf32(b)
    ah, al = m._split(a)
    bh, bl = m._split(b)
    out = ah @ bh
    if form in ("3", "2b"):
        out = out + ah @ bl
    if form in ("3", "2a"):
        out = out + al @ bh
    return out


def scheme(lf, forms):
    x = m.kernel_scheme(lf).clone()            # the diagonal blocks (the merges are redone below)
    z = torch.zeros(B, B)
    a1 = torch.cat([torch.cat([lf[16:32, 0:16], z], 1), torch.cat([z, lf[48:64, 32:48]], 1)], 0)
    b1 = torch.cat([torch.cat([x[0:16, 0:16], z], 1), torch.cat([z, x[32:48, 32:48]], 1)], 0)
    a2 = torch.cat([torch.cat([x[16:32, 16:32], z], 1), torch.cat([z, x[48:64, 48:64]], 1)], 0)
    q1 = -product(a2, product(a1, b1, forms[0]), forms[1])
    x[16:32, 0:16] = q1[0:16, 0:16]
    x[48:64, 32:48] = q1[16:32, 16:32]
    x[32:64, 0:32] = 0
    x[32:64, 0:32] = -product(x[32:64, 32:64], product(lf[32:64, 0:32], x[0:32, 0:32], forms[2]), forms[3])
    return x


CASES = [(-0.05, False, 64), (-0.05, True, 64), (-1.0, True, 64), (-60.0, False, 64), (-60.0, True, 64),
         (-5.0, True, 37), (0.0, True, 64), (-0.3, True, 63), (-0.02, True, 64), (-0.5, False, 64)] * 3

for name, forms in [("checkout", "3333"), ("X-hi", ("2a", "2b", "2a", "2b")), ("L·X only", ("2a", "3", "2a", "3")),
                    ("X·P only", ("3", "2b", "3", "2b")),
                    ("B head only", ("2a",) * 4), ("A head only", ("2b",) * 4), ("bf16", "1111"),
                    ("tf32 (FLA)", "tttt")]:
    worst_x = worst_out = 0.0
    l2 = []
    for s, (g_min, corr, nvalid) in enumerate(CASES):
        k, g, beta = m._inputs(1000 + s, g_min, corr)
        lf, beta_m = m.gated_l(k, g, beta, nvalid)
        ref = m.reference(lf)
        x = scheme(lf, forms)
        worst_x = max(worst_x, ((x.double() - ref).abs().max() / ref.abs().max()).item())
        out = (x * beta_m[None, :]).to(torch.bfloat16).double()
        ref_out = ref * beta_m.double()[None, :]
        worst_out = max(worst_out, ((out - ref_out).abs().max() / ref_out.abs().max().clamp_min(1e-30)).item())
        l2.append(((out - ref_out).norm() / ref_out.norm()).item())
    print(f"{name:12s} {','.join(forms):12s} X max rel {worst_x:.2e}   Aβ max rel {worst_out:.2e}   "
          f"Aβ rel L2 mean {sum(l2) / len(l2):.3e} max {max(l2):.3e}")


def chunked_o_error(T, g_scale, correlated, forms, seed):
    """o's relative L2 error, chunked form in fp64 with Aβ from ``forms`` (None: the exact inverse),
    against the fp64 token recurrence; one head, K = V = 128, a random start state."""
    gen = torch.Generator().manual_seed(seed)
    K = 128
    k = torch.randn(T, K, generator=gen)
    if correlated:
        k = torch.randn(1, K, generator=gen) + 0.3 * k
    k = (k / k.norm(dim=-1, keepdim=True)).to(torch.bfloat16)
    q = torch.randn(T, K, generator=gen).to(torch.bfloat16)
    v = torch.randn(T, K, generator=gen).to(torch.bfloat16)
    g = -torch.rand(T, generator=gen) * g_scale
    beta = torch.rand(T, generator=gen)
    S0 = torch.randn(K, K, generator=gen).double() * 0.5              # [V, K]
    scale = K ** -0.5
    S, o_ref = S0.clone(), torch.empty(T, K, dtype=torch.float64)
    for t in range(T):
        kt, vt = k[t].double(), v[t].double()
        S = S * torch.exp(g[t].double())
        S = S + beta[t].double() * torch.outer(vt - S @ kt, kt)
        o_ref[t] = S @ (q[t].double() * scale)
    S, o = S0.clone(), torch.empty_like(o_ref)
    for c0 in range(0, T, C):
        n = min(C, T - c0)
        kc = torch.zeros(C, K, dtype=torch.bfloat16)
        gc, bc = torch.zeros(C), torch.zeros(C)
        kc[:n], gc[:n], bc[:n] = k[c0:c0 + n], g[c0:c0 + n], beta[c0:c0 + n]
        lf, beta_m = m.gated_l(kc, gc, bc, n)
        x = scheme(lf, forms) if forms else m.reference(lf)
        a = (x.float() * beta_m[None, :]).to(torch.bfloat16).double()[:n, :n]
        gam = torch.cumsum(gc.double(), 0)[:n]
        kd, vd, qd = kc[:n].double(), v[c0:c0 + n].double(), q[c0:c0 + n].double() * scale
        u = a @ vd - (a @ (kd * torch.exp(gam)[:, None])) @ S.T
        o[c0:c0 + n] = (qd * torch.exp(gam)[:, None]) @ S.T + ((qd @ kd.T) * torch.exp(gam[:, None] - gam[None, :]).tril()) @ u
        S = S * torch.exp(gam[-1]) + u.T @ (kd * torch.exp(gam[-1] - gam)[:, None])
    return ((o - o_ref).norm() / o_ref.norm()).item()


print("\no through the chunked recurrence (1000 tokens, mean of 3 seeds), rel L2 vs fp64:")
for g_scale, corr in [(2.0, False), (30.0, False), (0.5, True), (0.1, True), (0.02, True)]:
    errs = {name: sum(chunked_o_error(1000, g_scale, corr, forms, s) for s in range(3)) / 3
            for name, forms in [("exact Aβ", None), ("checkout", "3333"), ("X-hi", ("2a", "2b", "2a", "2b")),
                                ("L·X only", ("2a", "3", "2a", "3")), ("X·P only", ("3", "2b", "3", "2b")),
                                ("tf32 (FLA)", "tttt")]}
    print(f"  gates -rand×{g_scale:<5} {'correlated' if corr else 'random    '} keys: "
          + "  ".join(f"{k} {v:.3e}" for k, v in errs.items()))
