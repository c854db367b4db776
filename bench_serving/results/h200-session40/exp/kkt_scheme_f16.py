"""CPU emulation: kkt_solve's merge products in plain fp16 (one tensor-core pass, both operands fp16,
fp32 accumulation: FlashInfer 0.6.14's CollectiveInverse works in fp16) against the kernel's X-hi
(split bf16, two passes) and plain bf16, on tests/test_kkt_scheme.py's cases and its fp64 reference.
Also the largest |X| (fp16 tops out at 65504).

    python bench_serving/results/h200-session40/exp/kkt_scheme_f16.py

Uses tests/test_kkt_scheme.py's emulation of the three schemes (``kernel_scheme(lf, scheme)``; written
in session 40 against the file before fp16 landed, which had only X-hi and plain bf16 and needed
fp16 patched in).
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[4] / "tests"))
import test_kkt_scheme as s  # noqa: E402


def errors(x, ref, beta_m):
    err = (x.double() - ref).abs().max().item() / ref.abs().max().item()
    out = (x * beta_m[None, :]).to(torch.bfloat16).double()
    ref_out = ref * beta_m.double()[None, :]
    den = max(ref_out.abs().max().item(), 1e-30)
    rel_l2 = ((out - ref_out).norm() / ref_out.norm().clamp_min(1e-30)).item()
    return err, (out - ref_out).abs().max().item() / den, rel_l2


def main():
    print("| case (seed, g_min, correlated, nvalid) | max abs X | X-hi inverse / Aβ max / Aβ rel L2 | bf16 | fp16 |")
    print("|---|---|---|---|---|")
    worst = {"xhi": [0, 0, 0], "bf16": [0, 0, 0], "f16": [0, 0, 0]}
    cases = list(s.CASES) + [(100 + i, gm, True, 64) for i, gm in enumerate((0.0, -0.01, -0.1))]
    for case in cases:
        k, g, beta = s._inputs(*case[:3])
        lf, beta_m = s.gated_l(k, g, beta, case[3])
        ref = s.reference(lf)
        res = {name: s.kernel_scheme(lf, name) for name in ("xhi", "bf16", "f16")}
        cells = []
        for name, x in res.items():
            e = errors(x, ref, beta_m)
            worst[name] = [max(a, b) for a, b in zip(worst[name], e)]
            cells.append(" / ".join(f"{v:.2e}" for v in e))
        print(f"| {case} | {ref.abs().max().item():.3g} | " + " | ".join(cells) + " |")
    print()
    for name, w in worst.items():
        print(f"- {name}: worst inverse {w[0]:.2e}, worst Aβ max {w[1]:.2e}, worst Aβ rel L2 {w[2]:.2e}")
    # range: equal keys, β = 1, no decay (the binomial case) and a few adversarial draws
    k = torch.nn.functional.normalize(torch.ones(64, 128), dim=-1).to(torch.bfloat16)
    lf, _ = s.gated_l(k, torch.zeros(64), torch.ones(64), 64)
    ref = s.reference(lf)
    print(f"- equal keys, β = 1, g = 0: max |X| {ref.abs().max().item():.3g}, fp16 inverse error "
          f"{(s.kernel_scheme(lf).double() - ref).abs().max().item() / ref.abs().max().item():.2e}")
    gen = torch.Generator().manual_seed(5)
    big = 0.0
    for t in range(200):
        base = torch.randn(1, 128, generator=gen)
        kk = torch.nn.functional.normalize(base + 0.05 * torch.rand(()).item() * torch.randn(64, 128, generator=gen), dim=-1)
        sign = torch.where(torch.rand(64, 1, generator=gen) < 0.5, -1.0, 1.0)      # alternating signs
        lf, _ = s.gated_l((kk * sign).to(torch.bfloat16), torch.zeros(64), torch.ones(64), 64)
        big = max(big, s.reference(lf).abs().max().item())
    print(f"- 200 draws of near-parallel unit keys with random signs, β = 1, g = 0: max |X| {big:.3g}")


if __name__ == "__main__":
    main()
