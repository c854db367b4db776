"""CPU emulation: the walk's rounding points before and after session 42's W merge, on longer
sequences than the test that shares its emulation (tests/test_rs_math.py::_rounded_walk).

"bf16ks" (before): Uᵀ = Vᵀ Aβᵀ − bf16((K S)ᵀ ⊙ e^γ) Aβᵀ   (V exact, the state term rounded; Aβ, P, U in bf16)
"bf16w":  Uᵀ = bf16(Vᵀ − (K S)ᵀ ⊙ e^γ) Aβᵀ                (W rounded once in bf16, as FlashInfer, FlashQLA, FLA)
"f16" (the kernel since session 42): the same with W, Aβ, U and P in fp16
Everything else as the kernel: X rounded to bf16 as the A operand, e^{γ_C−γ}⊙Uᵀ in bf16, fp32
accumulation emulated in fp64. Prints relative L2 errors of o and the final state against the fp64
token recurrence.

    python bench_serving/results/h200-session42/exp/w_rounding.py
"""
import os
import sys

import torch

from qla_serve.reference import l2norm, token_recurrence

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "tests"))
from test_rs_math import _rounded_walk  # noqa: E402


def bf(x):
    return x.to(torch.bfloat16).to(torch.float64)


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
        for form in ("bf16ks", "bf16w", "f16"):
            o, s = _rounded_walk(q, k, v, g, beta, S0, scale, form)
            eo = float((o - o_ref[:, 0]).norm() / o_ref.norm())
            es = float((s - s_ref[0, 0]).norm() / s_ref.norm())
            print(f"| {T_} | {gscale} | {form} | {eo:.3e} | {es:.3e} |")


if __name__ == "__main__":
    main()
