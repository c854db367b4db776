"""Accuracy of the merges associated the other way (README, "If WG_P sets the pace"): the first
product's fp32 accumulator rounded to fp16 *in registers* as the second's A operand,

    X_10 = −(X_11 L_10) X_00,  X_32 = −(X_33 L_32) X_22,  X[32:, :32] = −(X_B L_C) X_A,

against kkt_solve's order (−X_11 (L_10 X_00), …), both with fp16 operands and fp32 accumulation
(tests/test_kkt_scheme.py's emulation, its products and its error measure), on that test's cases and
a sweep of random chunks. Prints, per case, the inverse's worst error over max |X| and Aβ's (fp16
output) worst error over max |Aβ|, both against fp64: the measures the test bounds by 1.2e-3 and 1.0e-3.

    python bench_serving/results/h200-session46/exp/merge_assoc.py
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))
import test_kkt_scheme as ks  # noqa: E402

C, B = ks.C, ks.B


def f16mm(a, b):
    return ks._mm(a, b, "f16")


def other_order(lf):
    """kkt_solve's scheme with each merge as (X · L) · X: the diagonal blocks exactly as the kernel."""
    x = ks.kernel_scheme(lf)            # its diagonal blocks are the kernel's; the merges are redone
    d = [x[i * B:(i + 1) * B, i * B:(i + 1) * B].clone() for i in range(4)]
    y = torch.zeros(C, C)
    for i in range(4):
        y[i * B:(i + 1) * B, i * B:(i + 1) * B] = d[i]
    y[16:32, 0:16] = -f16mm(f16mm(d[1], lf[16:32, 0:16]), d[0])
    y[48:64, 32:48] = -f16mm(f16mm(d[3], lf[48:64, 32:48]), d[2])
    y[32:64, 0:32] = -f16mm(f16mm(y[32:64, 32:64], lf[32:64, 0:32]), y[0:32, 0:32])
    return y


def main():
    worst = {"kernel": [0.0, 0.0], "other": [0.0, 0.0]}
    rows = [(s, gm, corr, nv) for s, gm, corr, nv in ks.CASES]
    rows += [(100 + s, -3.0 * (s % 5) / 4, s % 2 == 0, 64 - (s % 3) * 17) for s in range(40)]
    for seed, g_min, corr, nv in rows:
        k, g, beta = ks._inputs(seed, g_min, corr)
        lf, beta_m = ks.gated_l(k, g, beta, nv)
        a = ks.scheme_errors(lf, beta_m, ks.kernel_scheme(lf))
        b = ks.scheme_errors(lf, beta_m, other_order(lf))
        for name, e in (("kernel", a), ("other", b)):
            worst[name] = [max(worst[name][0], e[0]), max(worst[name][1], e[1])]
        if seed < 100:
            print(f"case {seed} g_min {g_min:6.2f} corr {int(corr)} nvalid {nv:2d}: inverse {a[0]:.2e} → {b[0]:.2e}, "
                  f"Aβ {a[1]:.2e} → {b[1]:.2e}")
    print(f"worst over {len(rows)} chunks: kernel order inverse {worst['kernel'][0]:.2e}, Aβ {worst['kernel'][1]:.2e}; "
          f"other order inverse {worst['other'][0]:.2e}, Aβ {worst['other'][1]:.2e}")


if __name__ == "__main__":
    main()
