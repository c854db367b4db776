"""CPU emulation of the block-inverse scheme in kernels/hopper/kkt_solve.py, step for step, against
torch.linalg.solve_triangular in fp64.

The kernel: L = StrictLower(diag(β) K Kᵀ ⊙ D) (fp32, masked before exp), 16×16 diagonal blocks by
per-column forward substitution in fp32, then the 16→32 and 32→64 merges
    X_10 = −X_11 (L_10 X_00),  X_32 = −X_33 (L_32 X_22),  X[32:, :32] = −X_B (L_C X_A)
as 32×32×32 products in split bf16 (hi = bf16(x), lo = bf16(x − hi); A_hi B_hi + A_hi B_lo + A_lo B_hi,
fp32 accumulation), output X · diag(β) rounded to bf16. No GPU needed; runs in well under a second.
"""
import pytest
import torch

C, B, HF = 64, 16, 32


def _split(x: torch.Tensor):
    hi = x.to(torch.bfloat16)
    lo = (x - hi.float()).to(torch.bfloat16)
    return hi.float(), lo.float()


def _mm3(a: torch.Tensor, b: torch.Tensor, passes: int = 3) -> torch.Tensor:
    """The kernel's split-bf16 product (fp32 accumulate); passes=1 is plain bf16 (for the negative check)."""
    ah, al = _split(a)
    bh, bl = _split(b)
    out = ah @ bh
    if passes == 3:
        out = out + ah @ bl + al @ bh
    return out


def gated_l(k: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, nvalid: int) -> tuple[torch.Tensor, torch.Tensor]:
    """k [64, K] bf16, g/beta [64] fp32 (rows >= nvalid are padding: g = β = 0 as the kernel loads them)."""
    g = torch.where(torch.arange(C) < nvalid, g, torch.zeros_like(g))
    beta = torch.where(torch.arange(C) < nvalid, beta, torch.zeros_like(beta))
    gam = torch.cumsum(g, 0)                        # the kernel's T.cumsum (fp32)
    kk = k.float() @ k.float().T
    i = torch.arange(C)[:, None]
    j = torch.arange(C)[None, :]
    mask = (i > j) & (i < nvalid)
    ex = torch.exp(torch.where(i > j, gam[:, None] - gam[None, :], torch.zeros(())))  # never e^{positive}
    lf = torch.where(mask, kk * beta[:, None] * ex, torch.zeros(()))
    return lf, beta


def kernel_scheme(lf: torch.Tensor, passes: int = 3) -> torch.Tensor:
    """X = (I + lf)⁻¹ in fp32 by exactly the kernel's block order."""
    x = torch.zeros(C, C, dtype=torch.float32)
    # 1. diagonal blocks: x_r = δ_rc − Σ_{m<r} L_rm x_m, m ascending (the kernel gives each column
    #    its own thread; here all 16 columns of a block advance together, same fp32 operation order)
    for blk in range(4):
        ld = lf[blk * B:(blk + 1) * B, blk * B:(blk + 1) * B]
        xb = torch.zeros(B, B, dtype=torch.float32)
        for r in range(B):
            v = torch.zeros(B, dtype=torch.float32)
            v[r] = 1.0
            for m in range(r):
                v = v - ld[r, m] * xb[m]
            xb[r] = v
        x[blk * B:(blk + 1) * B, blk * B:(blk + 1) * B] = xb
    # 2. 16 -> 32, both pairs in one block-diagonal 32x32x32 product each
    z = torch.zeros(B, B)
    a1 = torch.cat([torch.cat([lf[16:32, 0:16], z], 1), torch.cat([z, lf[48:64, 32:48]], 1)], 0)
    b1 = torch.cat([torch.cat([x[0:16, 0:16], z], 1), torch.cat([z, x[32:48, 32:48]], 1)], 0)
    a2 = torch.cat([torch.cat([x[16:32, 16:32], z], 1), torch.cat([z, x[48:64, 48:64]], 1)], 0)
    p1 = _mm3(a1, b1, passes)
    q1 = -_mm3(a2, p1, passes)
    x[16:32, 0:16] = q1[0:16, 0:16]
    x[48:64, 32:48] = q1[16:32, 16:32]
    # 3. 32 -> 64
    p2 = _mm3(lf[32:64, 0:32], x[0:32, 0:32], passes)
    x[32:64, 0:32] = -_mm3(x[32:64, 32:64], p2, passes)
    return x


def reference(lf: torch.Tensor) -> torch.Tensor:
    m = torch.eye(C, dtype=torch.float64) + lf.double()
    return torch.linalg.solve_triangular(m, torch.eye(C, dtype=torch.float64), upper=False)


def _inputs(seed: int, g_min: float, correlated: bool):
    gen = torch.Generator().manual_seed(seed)
    k = torch.randn(C, 128, generator=gen)
    if correlated:                                  # near-parallel keys: |k_i·k_j| close to 1
        k = torch.randn(1, 128, generator=gen) + 0.3 * k
    k = (k / k.norm(dim=-1, keepdim=True)).to(torch.bfloat16)
    g = torch.rand(C, generator=gen) * g_min        # per-token gate in [g_min, 0]
    beta = torch.rand(C, generator=gen)
    return k, g, beta


CASES = [(s, gm, corr, nv) for s, (gm, corr, nv) in enumerate([
    (-0.05, False, 64), (-0.05, True, 64), (-1.0, True, 64), (-60.0, False, 64), (-60.0, True, 64),
    (-5.0, True, 37), (0.0, True, 64), (-60.0, True, 1), (-0.3, True, 63)])]


@pytest.mark.parametrize("seed,g_min,correlated,nvalid", CASES)
def test_scheme_matches_triangular_solve(seed, g_min, correlated, nvalid):
    k, g, beta = _inputs(seed, g_min, correlated)
    lf, beta_m = gated_l(k, g, beta, nvalid)
    assert torch.isfinite(lf).all()
    x = kernel_scheme(lf)
    ref = reference(lf)
    assert torch.isfinite(x).all()
    scale = ref.abs().max().item()
    err = (x.double() - ref).abs().max().item() / scale
    assert err < 2e-5, f"fp32 inverse off by {err:.2e} (relative to max |X|)"
    assert (x.triu(1) == 0).all()
    # the kernel's output: X · diag(β), rounded once to bf16
    out = (x * beta_m[None, :]).to(torch.bfloat16).double()
    ref_out = ref * beta_m.double()[None, :]
    err_out = (out - ref_out).abs().max().item() / max(ref_out.abs().max().item(), 1e-30)
    assert err_out < 8e-3, err_out
    # rows/columns of padding tokens: identity rows, zero β columns
    if nvalid < C:
        assert (out[:, nvalid:] == 0).all()


def test_single_pass_bf16_merges_would_fail():
    """The tolerance above is tight enough to see the lo terms: without them the error is far larger."""
    errs = []
    for s in range(4):
        k, g, beta = _inputs(100 + s, -0.05, True)
        lf, _ = gated_l(k, g, beta, C)
        ref = reference(lf)
        x1 = kernel_scheme(lf, passes=1)
        errs.append((x1.double() - ref).abs().max().item() / ref.abs().max().item())
    assert max(errs) > 2e-4, errs


def test_wrong_merge_order_fails():
    """Sanity of the check itself: the non-commuting merge in the wrong order is caught."""
    k, g, beta = _inputs(7, -0.05, True)
    lf, _ = gated_l(k, g, beta, C)
    x = kernel_scheme(lf)
    bad = x.clone()
    bad[32:64, 0:32] = -_mm3(_mm3(x[0:32, 0:32], lf[32:64, 0:32].T.contiguous()).T.contiguous(), x[32:64, 32:64])
    ref = reference(lf)
    assert (bad.double() - ref).abs().max().item() / ref.abs().max().item() > 1e-2
