"""CPU emulation: the walk's bf16 rounding points before and after session 42's W merge.

Old form (main): Uᵀ = Vᵀ Aβᵀ − bf16((K S)ᵀ ⊙ e^γ) Aβᵀ      (V exact, the state term rounded)
New form (W1/W2): Uᵀ = bf16(Vᵀ − (K S)ᵀ ⊙ e^γ) Aβᵀ        (W rounded once, as FlashInfer, FlashQLA and FLA)
"new16": the same product in fp16, W and Aβ rounded to fp16 (kkt_solve writing Aβ in fp16)
Everything else as the kernel: X rounded to bf16 as the A operand, Aβ and P in bf16, Uᵀ and
e^{γ_C−γ}⊙Uᵀ rounded to bf16, fp32 accumulation emulated in fp64 (its rounding is far below bf16's).
Prints relative L2 errors of o and the final state against the fp64 token recurrence.

    python bench_serving/results/h200-session42/exp/w_rounding.py
"""
import torch

from qla_serve.reference import l2norm, token_recurrence

C = 64


def bf(x):
    return x.to(torch.bfloat16).to(torch.float64)


def h16(x):
    return x.to(torch.float16).to(torch.float64)


def walk(q, k, v, g, beta, S0, scale, form):
    T_, K = k.shape
    X = S0.T.clone()                          # [V, K]
    o = torch.zeros(T_, v.shape[1], dtype=torch.float64)
    for left in range(0, T_, C):
        sl = slice(left, min(left + C, T_))
        n = sl.stop - sl.start
        qc, kc, vc = q[sl], k[sl], v[sl]
        gam = torch.cumsum(g[sl], 0)
        eg, egl = torch.exp(gam), torch.exp(gam[-1] - gam)
        d = gam[:, None] - gam[None, :]
        D = torch.where(d <= 0, torch.exp(d.clamp(max=0)), torch.zeros_like(d))
        L = torch.tril(beta[sl, None] * (kc @ kc.T) * D, -1)
        Ab64 = torch.linalg.solve(torch.eye(n, dtype=torch.float64) + L, torch.diag(beta[sl]))
        Ab = h16(Ab64) if form == "new16" else bf(Ab64)
        P = bf(torch.tril(scale * (qc @ kc.T) * D))
        Xb = bf(X)
        ks = Xb @ kc.T                         # (K S)ᵀ, fp32 accumulate
        if form == "old":
            Ut = vc.T @ Ab.T - bf(ks * eg[None, :]) @ Ab.T
        elif form == "new":
            Ut = bf(vc.T - ks * eg[None, :]) @ Ab.T
        else:
            Ut = h16(vc.T - ks * eg[None, :]) @ Ab.T
        Ot = scale * (Xb @ qc.T) * eg[None, :] + bf(Ut) @ P.T
        X = torch.exp(gam[-1]) * X + bf(Ut * egl[None, :]) @ kc
        o[sl] = Ot.T
    return o, X.T


def main():
    print("| T | gate | form | o rel L2 | state rel L2 |")
    print("|---|---|---|---|---|")
    for T_, gscale in ((2048, 0.1), (2048, 1.0), (4096, 0.02)):
        gen = torch.Generator().manual_seed(T_ + int(gscale * 100))
        K = V = 128
        q = bf(l2norm(torch.randn(T_, K, generator=gen, dtype=torch.float64)))
        k = bf(l2norm(torch.randn(T_, K, generator=gen, dtype=torch.float64)))
        v = bf(torch.randn(T_, V, generator=gen, dtype=torch.float64))
        g = torch.nn.functional.logsigmoid(torch.randn(T_, generator=gen, dtype=torch.float64) + 2) * gscale
        beta = torch.sigmoid(torch.randn(T_, generator=gen, dtype=torch.float64))
        S0 = torch.randn(K, V, generator=gen, dtype=torch.float64) * 0.3
        scale = K ** -0.5
        o_ref, s_ref = token_recurrence(q[:, None], k[:, None], v[:, None], g[:, None], beta[:, None],
                                        [0, T_], S0[None, None], scale=scale, use_qk_l2norm=False)
        for form in ("old", "new", "new16"):
            o, s = walk(q, k, v, g, beta, S0, scale, form)
            eo = float((o - o_ref[:, 0]).norm() / o_ref.norm())
            es = float((s - s_ref[0, 0]).norm() / s_ref.norm())
            print(f"| {T_} | {gscale} | {form} | {eo:.3e} | {es:.3e} |")


if __name__ == "__main__":
    main()
