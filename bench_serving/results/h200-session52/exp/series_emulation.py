"""Session 52: CPU emulation of the series merge's inverse (patches/kkt_solve_series.patch) (fp16 operands where they enter the tensor cores,
fp32 accumulation) against main's block scheme and fp64, on tests/test_kkt_scheme.py's cases. Per case: (inverse
error relative to max |X|, Aβ error relative to max |Aβ|) for main, the series without and with the exact
fp32 diagonal blocks (the kernel's form).   python bench_serving/results/h200-session52/exp/series_emulation.py
"""
import sys, torch
sys.path.insert(0, 'tests')
from test_kkt_scheme import gated_l, kernel_scheme, reference, scheme_errors, _inputs, CASES, C, B
f16 = lambda x: x.to(torch.float16).float()
BLOCK_DIAG = (torch.arange(C)[:, None] // B) == (torch.arange(C)[None, :] // B)   # the 16×16 diagonal blocks

def diag_blocks(lf):
    """X_d: the diagonal blocks of main's inverse, which its merges leave as the substitution made them."""
    return torch.where(BLOCK_DIAG, kernel_scheme(lf), torch.zeros(()))

def neumann(lf, fix_diag=False):
    xd = diag_blocks(lf)
    loff = torch.where(BLOCK_DIAG, torch.zeros(()), lf)
    Et = f16(loff.T) @ f16(xd.T)
    S1 = f16(Et)
    Q = S1 @ S1
    W1 = torch.eye(C) + Q
    R = f16(W1) @ S1
    W2 = W1 - R
    Xt = f16(xd.T) @ f16(W2)
    X = Xt.T.contiguous()
    if fix_diag:
        X = torch.where(BLOCK_DIAG, xd, X)
    return X

for case in CASES:
    k, g, beta = _inputs(*case[:3])
    lf, bm = gated_l(k, g, beta, case[3])
    e0 = scheme_errors(lf, bm, kernel_scheme(lf))[:2]
    e1 = scheme_errors(lf, bm, neumann(lf))[:2]
    e2 = scheme_errors(lf, bm, neumann(lf, True))[:2]
    print(case, ["%.2e %.2e" % e for e in (e0, e1, e2)])
