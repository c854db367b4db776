"""(Session 33 record: tests/test_kkt_scheme.py as it would be with kkt_solve_fs.py in place of
kernels/hopper/kkt_solve.py; not collected from here.)

CPU emulation of kernels/hopper/kkt_solve.py's inverse, thread for thread, against
torch.linalg.solve_triangular in fp64.

The kernel: L = StrictLower(diag(β) K Kᵀ ⊙ D) (fp32, masked before exp), stored transposed in
shared memory with L's even rows first and its odd rows LT_ODD floats later; then each of 128 threads
owns one column c of X = (I + L)⁻¹ for each of two value heads, rows of one parity (lane // 16),
and solves right-looking in fp32: acc = e_c; for m from its warp's first column group: x_m = acc_m
(one shuffle from the lane of parity m % 2), acc_r −= L_rm x_m, L_rm read four at a time. Output
X · diag(β) rounded to bf16. No GPU needed; runs in well under a second.
"""
import pytest
import torch

from qla_serve.kernels.hopper import kkt_solve as kernel

C = kernel.CHUNK


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


def lt_shared(lf: torch.Tensor) -> torch.Tensor:
    """Lᵀ as the kernel stores it: row m = column m of L, even rows of L first, odd ones LT_ODD later."""
    lt = torch.zeros(C, kernel.LT_ROW, dtype=torch.float32)
    i = torch.arange(C)
    lt[:, (i % 2) * kernel.LT_ODD + i // 2] = lf.T
    return lt


def kernel_scheme(lf: torch.Tensor, skip_from_group: bool = True, shuffle_parity: bool = True) -> torch.Tensor:
    """X = (I + lf)⁻¹ in fp32 by the kernel's threads (head slot 0: warp w owns column group w).
    The flags break one step each, for the negative checks."""
    lt = lt_shared(lf)
    x = torch.full((C, C), float("nan"), dtype=torch.float32)
    for warp in range(4):
        lane = torch.arange(32)
        col, par = lane % 16, lane // 16
        grp = warp
        c = grp * 16 + col
        acc = (torch.arange(C // 2)[None, :] * 2 + par[:, None] == c[:, None]).float()   # [lane, j]
        for mb in range(4):
            if skip_from_group and mb < grp:
                continue
            for mm in range(16):
                src = col + (mm % 2) * 16 if shuffle_parity else col + par * 16
                xm = acc[src, mb * 8 + mm // 2].clone()
                for q in range(8):
                    if q * 4 + 3 >= mb * 8 + mm // 2:
                        lv = lt[mb * 16 + mm][par[:, None] * kernel.LT_ODD + q * 4 + torch.arange(4)[None, :]]
                        acc[:, q * 4:q * 4 + 4] = acc[:, q * 4:q * 4 + 4] - lv * xm[:, None]
        rows = torch.arange(C // 2)[None, :] * 2 + par[:, None]
        x[rows, c[:, None].expand_as(rows)] = acc
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


def test_scheme_checks_can_fail():
    """Sanity of the check itself: starting every column at its warp's group is exact only because
    x_m = 0 above the diagonal; taking x_m from the wrong parity's lane, or skipping one more
    group, is caught by the tolerance above."""
    k, g, beta = _inputs(7, -0.05, True)
    lf, _ = gated_l(k, g, beta, C)
    ref = reference(lf)
    for bad in (kernel_scheme(lf, shuffle_parity=False),):
        assert not torch.isfinite(bad).all() or (bad.double() - ref).abs().max().item() / ref.abs().max().item() > 1e-2
    # the skip is exact: the same columns without it agree to the last bit
    assert torch.equal(kernel_scheme(lf, skip_from_group=False), kernel_scheme(lf))


def test_lt_layout_is_conflict_free():
    """Step 1 stores K Kᵀ's wgmma fragment (thread t of warp w holds rows 16w + l // 4 (+ 8), columns
    8u + 2 (l % 4) (+ 1)) into Lᵀ: one store instruction's 32 lanes hit 32 different banks; and the
    two parities' 16-byte vectors of a row start in different banks."""
    for u in range(8):
        for half in range(2):
            for e in range(2):
                banks = set()
                for lane in range(32):
                    i = lane // 4 + 8 * half
                    j = 8 * u + 2 * (lane % 4) + e
                    banks.add((j * kernel.LT_ROW + (i % 2) * kernel.LT_ODD + i // 2) % 32)
                assert len(banks) == 32
    assert kernel.LT_ROW % 4 == 0 and kernel.LT_ODD % 4 == 0            # 16-byte vectors
    for q in range(8):
        even = {(q * 4 + e) % 32 for e in range(4)}
        odd = {(kernel.LT_ODD + q * 4 + e) % 32 for e in range(4)}
        assert not even & odd
