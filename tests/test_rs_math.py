"""The algebra of the RS walk in kernels/hopper/fused_fwd.py, emulated in fp64 on the CPU.

The kernel keeps X = Sᵀ (the state in the pool's "vk" orientation, [V rows, K]) in registers, 64 V rows
per consumer warpgroup, and walks each sequence's 64-token chunks in exactly this order:

    (chunk-only, WG_P and the loaders)   γ = chunk-local cumsum(g), padded past eos with its last valid value
                                         e^γ, e^{γ_C − γ}                      (vectors, from the γ loader)
                                         Aβ = (I + StrictLower(β K Kᵀ ⊙ D))⁻¹ diag(β)   (kkt_solve; rows past
                                              eos hold other data, columns past eos are 0)
                                         P = scale · (Q Kᵀ ⊙ D_incl)
    (consumer, chain)                    Wᵀ = Vᵀ − (X Kᵀ) ⊙ e^{γ_j} per column j,   Uᵀ = Wᵀ Aβᵀ
                                         Uᵀ[:, i ≥ nvalid] = 0                 (a select)
                                         X ← e^{γ_C} X + (Uᵀ ⊙ e^{γ_C − γ_i} per column i) K
    (consumer, beside)                   Oᵀ = scale · (X_old Qᵀ) ⊙ e^{γ_i} per column + Uᵀ Pᵀ

Rows of q/k/v/Aβ past a sequence's end are filled with junk here (the kernel sees the next sequence's data
or TMA's zero fill) to show that the select is what keeps them out. The result must match the token-by-token
fp64 oracle (qla_serve.reference.token_recurrence) to rounding, for both pool layouts, a partial last chunk,
a 1-token sequence, initial states and in-kernel l2norm. The earlier forms of Uᵀ ("ks": Vᵀ Aβᵀ − ((X Kᵀ) ⊙
e^γ) Aβᵀ, two products, until session 42; "wk": Vᵀ Aβᵀ + X (−Wₖ)ᵀ with −Wₖ = −Aβ diag(e^γ) K from WG_P) are
kept as parameters. The last test emulates the kernel's rounding points (bf16 state and K/Q products,
fp16 Wᵀ Aβᵀ and Uᵀ Pᵀ) against the bf16 forms.
"""
import pytest
import torch

from qla_serve.reference import l2norm, token_recurrence

C = 64
WG_ROWS = 64


def kkt_chunk(kc, bc, gam, nvalid):
    """Aβ of one chunk (valid rows/columns only), as kkt_solve builds it."""
    d = gam[:nvalid, None] - gam[None, :nvalid]
    D = torch.where(d <= 0, torch.exp(d.clamp(max=0)), torch.zeros_like(d))       # i ≥ j: e^{γi−γj}
    kk = (bc[:nvalid, None] * (kc[:nvalid] @ kc[:nvalid].T)) * D
    A = torch.eye(nvalid, dtype=kc.dtype) + torch.tril(kk, -1)
    return torch.linalg.solve(A, torch.diag(bc[:nvalid]))


def rs_walk(q, k, v, g, beta, cu, pool_rows, layout, *, scale, use_qk_l2norm, block_v, junk, form="ks"):
    """fp64 emulation of the kernel's RS-ordered walk. pool_rows [N, HV, *layout shape] or None
    (zero start). Returns o [T, HV, V] and the final pool rows in ``layout``. ``form``: how Uᵀ is
    made: "w" (the kernel: Wᵀ = Vᵀ − (X Kᵀ) ⊙ e^γ, junk K rows past eos included, times Aβᵀ), "ks"
    (Vᵀ Aβᵀ − ((X Kᵀ) ⊙ e^γ) Aβᵀ) or "wk" (WG_P's −Wₖ = −Aβ diag(e^γ) K)."""
    T_, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    G = HV // H
    if use_qk_l2norm:
        q, k = l2norm(q), l2norm(k)
    o = torch.zeros(T_, HV, V, dtype=torch.float64)
    finals = []
    gen = torch.Generator().manual_seed(123)
    for n in range(len(cu) - 1):
        bos, eos = cu[n], cu[n + 1]
        rows = []
        for h in range(HV):
            hk = h // G
            if pool_rows is None:
                Xfull = torch.zeros(V, K, dtype=torch.float64)
            else:
                row = pool_rows[n, h]
                Xfull = row.clone() if layout == "vk" else row.T.clone()      # X = Sᵀ
            for v0 in range(0, V, block_v):
                for w in range(block_v // WG_ROWS):                         # one consumer per 64 V rows
                    r0 = v0 + w * WG_ROWS
                    X = Xfull[r0:r0 + WG_ROWS].clone()
                    for left in range(bos, eos, C):
                        nvalid = min(eos - left, C)
                        sl = slice(left, left + nvalid)

                        def pad(x, width):
                            out = torch.randn(C, width, generator=gen, dtype=torch.float64) * junk
                            out[:nvalid] = x
                            return out
                        qc, kc = pad(q[sl, hk], K), pad(k[sl, hk], K)
                        vc = pad(v[sl, h, r0:r0 + WG_ROWS], WG_ROWS)
                        gam = torch.cumsum(g[sl, h], 0)
                        gam = torch.cat([gam, gam[-1].repeat(C - nvalid)])       # the loader's padding
                        eg = torch.exp(gam)
                        egl = torch.exp(gam[-1] - gam)
                        Ab = torch.randn(C, C, generator=gen, dtype=torch.float64) * junk
                        Ab[:, nvalid:] = 0.0                                      # β padded with 0
                        Ab[:nvalid, :nvalid] = kkt_chunk(kc, beta[sl, h], gam, nvalid)
                        # chunk-only products (WG_P)
                        Wk_neg = -(Ab * eg[None, :]) @ kc
                        dd = gam[:, None] - gam[None, :]
                        P = torch.where(torch.tril(torch.ones(C, C, dtype=torch.bool)),
                                        scale * (qc @ kc.T) * torch.exp(dd.clamp(max=0)), torch.zeros(C, C,
                                                                                                   dtype=torch.float64))
                        # the chain (consumer)
                        if form == "w":
                            Ut = (vc.T - (X @ kc.T) * eg[None, :]) @ Ab.T
                        elif form == "ks":
                            Ut = vc.T @ Ab.T - ((X @ kc.T) * eg[None, :]) @ Ab.T
                        else:
                            Ut = vc.T @ Ab.T + X @ Wk_neg.T
                        Ut = torch.where(torch.arange(C)[None, :] < nvalid, Ut, torch.zeros_like(Ut))
                        Ot = scale * (X @ qc.T) * eg[None, :] + Ut @ P.T
                        X = torch.exp(gam[-1]) * X + (Ut * egl[None, :]) @ kc
                        o[sl, h, r0:r0 + WG_ROWS] = Ot.T[:nvalid]
                    Xfull[r0:r0 + WG_ROWS] = X
            rows.append(Xfull if layout == "vk" else Xfull.T)
        finals.append(torch.stack(rows))
    return o, torch.stack(finals)


@pytest.mark.parametrize("form", ["w", "ks", "wk"])
@pytest.mark.parametrize("layout", ["vk", "kv"])
@pytest.mark.parametrize("block_v,use_l2,init", [(64, False, True), (128, True, True), (128, False, False)])
def test_rs_walk_matches_token_oracle(layout, block_v, use_l2, init, form):
    torch.manual_seed(0)
    seqlens = [130, 64, 1, 200]            # a partial last chunk, an exact chunk, one token, 4 chunks
    cu = [0]
    for s in seqlens:
        cu.append(cu[-1] + s)
    T_, H, HV, K, V = cu[-1], 1, 2, 128, 128
    q = torch.randn(T_, H, K, dtype=torch.float64)
    k = torch.randn(T_, H, K, dtype=torch.float64)
    if not use_l2:
        q, k = l2norm(q), l2norm(k)        # keep the walk well conditioned either way
    v = torch.randn(T_, HV, V, dtype=torch.float64)
    g = -torch.rand(T_, HV, dtype=torch.float64) * torch.tensor([0.1, 3.0], dtype=torch.float64)
    beta = torch.rand(T_, HV, dtype=torch.float64)
    scale = K ** -0.5
    N = len(seqlens)
    S0 = torch.randn(N, HV, K, V, dtype=torch.float64) * 0.3 if init else None      # math layout [K, V]
    pool_rows = None if S0 is None else (S0.transpose(-1, -2) if layout == "vk" else S0).contiguous()

    o, fin = rs_walk(q, k, v, g, beta, cu, pool_rows, layout, scale=scale, use_qk_l2norm=use_l2,
                     block_v=block_v, junk=5.0, form=form)
    o_ref, s_ref = token_recurrence(q, k, v, g, beta, cu, S0, scale=scale, use_qk_l2norm=use_l2)
    fin_math = fin.transpose(-1, -2) if layout == "vk" else fin

    def rel(a, b):
        return float((a - b).norm() / b.norm())
    assert rel(o, o_ref) < 1e-10
    assert rel(fin_math, s_ref) < 1e-10
    # the 1-token sequence and the partial chunk, on their own
    assert rel(o[cu[2]:cu[3]], o_ref[cu[2]:cu[3]]) < 1e-10
    assert rel(o[cu[0]:cu[1]], o_ref[cu[0]:cu[1]]) < 1e-10


def _rounded_walk(q, k, v, g, beta, S0, scale, form):
    """One head's walk with the kernel's rounding points: X to bf16 as the A operand of X [Kᵀ | Qᵀ];
    Aβ, P and Wᵀ / Uᵀ in ``form``'s dtype ("f16": the kernel since session 42; "bf16w": W rounded in
    bf16; "bf16ks": the two-product form before it, V exact and the state term rounded); e^{γ_C−γ} ⊙ Uᵀ
    in bf16 (its product with K); fp32 accumulation as fp64."""
    def rnd(x, dt):
        return x.to(dt).to(torch.float64)
    bf, hw = torch.bfloat16, (torch.float16 if form == "f16" else torch.bfloat16)
    X = S0.T.clone()
    o = torch.zeros(k.shape[0], v.shape[1], dtype=torch.float64)
    for left in range(0, k.shape[0], C):
        sl = slice(left, min(left + C, k.shape[0]))
        n = sl.stop - sl.start
        qc, kc, vc = q[sl], k[sl], v[sl]
        gam = torch.cumsum(g[sl], 0)
        eg, egl = torch.exp(gam), torch.exp(gam[-1] - gam)
        d = gam[:, None] - gam[None, :]
        D = torch.where(d <= 0, torch.exp(d.clamp(max=0)), torch.zeros_like(d))
        L = torch.tril(beta[sl, None] * (kc @ kc.T) * D, -1)
        Ab = rnd(torch.linalg.solve(torch.eye(n, dtype=torch.float64) + L, torch.diag(beta[sl])), hw)
        P = rnd(torch.tril(scale * (qc @ kc.T) * D), hw)
        Xb = rnd(X, bf)
        ks = Xb @ kc.T
        if form == "bf16ks":
            Ut = vc.T @ Ab.T - rnd(ks * eg[None, :], bf) @ Ab.T
        else:
            Ut = rnd(vc.T - ks * eg[None, :], hw) @ Ab.T
        o[sl] = (scale * (Xb @ qc.T) * eg[None, :] + rnd(Ut, hw) @ P.T).T
        X = torch.exp(gam[-1]) * X + rnd(Ut * egl[None, :], bf) @ kc
    return o, X.T


def test_fp16_w_product_is_the_most_precise_form():
    """The kernel's fp16 Wᵀ Aβᵀ and Uᵀ Pᵀ against the fp64 recurrence: below the two-product bf16 form
    it replaced, which in turn is below W rounded in bf16 (a merged product without fp16 would have
    lost precision; results/h200-session42/exp/w_rounding.py has longer cases)."""
    gen = torch.Generator().manual_seed(42)
    T_, K, V = 640, 128, 128
    q = l2norm(torch.randn(T_, K, generator=gen, dtype=torch.float64)).to(torch.bfloat16).double()
    k = l2norm(torch.randn(T_, K, generator=gen, dtype=torch.float64)).to(torch.bfloat16).double()
    v = torch.randn(T_, V, generator=gen, dtype=torch.float64).to(torch.bfloat16).double()
    g = torch.nn.functional.logsigmoid(torch.randn(T_, generator=gen, dtype=torch.float64) + 2) * 0.1
    beta = torch.sigmoid(torch.randn(T_, generator=gen, dtype=torch.float64))
    S0 = torch.randn(K, V, generator=gen, dtype=torch.float64) * 0.3
    scale = K ** -0.5
    o_ref, s_ref = token_recurrence(q[:, None], k[:, None], v[:, None], g[:, None], beta[:, None],
                                    [0, T_], S0[None, None], scale=scale, use_qk_l2norm=False)
    err = {}
    for form in ("f16", "bf16ks", "bf16w"):
        o, s = _rounded_walk(q, k, v, g, beta, S0, scale, form)
        err[form] = (float((o - o_ref[:, 0]).norm() / o_ref.norm()), float((s - s_ref[0, 0]).norm() / s_ref.norm()))
    for i in (0, 1):
        assert err["f16"][i] < 0.9 * err["bf16ks"][i] < 0.9 * err["bf16w"][i], err
