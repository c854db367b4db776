"""Does tests/test_tri_inverse.py see a wrong tri_inverse? Each line below mutates the function's text
(kernels/hopper/tri_inverse.ALGORITHM) in one place; the test's main check must fail on every one.
Session 54: 10 of 10 caught.      python bench_serving/results/h200-session54/scripts/tri_inverse_mutations.py
(from the repository root; ~1 min: one g++ build and run a mutation)."""
import os
import pathlib
import sys
import tempfile

sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
import test_tri_inverse as tt  # noqa: E402

from qla_serve.kernels.hopper import tri_inverse  # noqa: E402

MUTATIONS = [
    ("level 1 reads L untransposed", "x[r] = qla_inv_fma(-Tb[m * ld + r], x[m], x[r]);",
     "x[r] = qla_inv_fma(-Tb[r * ld + m], x[m], x[r]);"),
    ("no __syncwarp before the diagonal block is overwritten", "    qla_inv_syncwarp();\n", ""),
    ("level 2: L's B fragment with swapped strides", "qla_inv_frag_b(fb, T + a0 * ld + b0, ld, 1, g, t);",
     "qla_inv_frag_b(fb, T + a0 * ld + b0, 1, ld, g, t);"),
    ("level 2: both warps of a pair take the same rows", "T + (b0 + 8 * h) * ld + b0, 1, ld", "T + (b0) * ld + b0, 1, ld"),
    ("accumulator-to-operand pairs swapped", "  a[1] = qla_inv_h2(d0[2], d0[3]);\n  a[2] = qla_inv_h2(d1[0], d1[1]);",
     "  a[2] = qla_inv_h2(d0[2], d0[3]);\n  a[1] = qla_inv_h2(d1[0], d1[1]);"),
    ("level 3 skips the wrong X_A block", "if (s == 0 && u == 1) continue;", "if (s == 1 && u == 0) continue;"),
    ("level 3 reads X_B's corner (it holds L_32ᵀ)", "if (s == 1 && v == 0) continue;", ""),
    ("a result stored without its sign", "X[(n0 + t + 1) * ldx + i0 + g] = -d[1];", "X[(n0 + t + 1) * ldx + i0 + g] = d[1];"),
    ("level 3's operand tiles in the wrong order", "qla_inv_acc_to_a(fp[1], d[2], d[3]);",
     "qla_inv_acc_to_a(fp[1], d[3], d[2]);"),
    ("an A fragment element from the wrong column", "p[(g + 8) * rs + (t + 9) * cs]);\n}", "p[(g + 8) * rs + (t + 8) * cs]);\n}"),
]


class _Tmp:
    def mktemp(self, name):
        return pathlib.Path(tempfile.mkdtemp(prefix=name))


def main() -> int:
    base = tri_inverse.ALGORITHM
    missed = 0
    for name, old, new in MUTATIONS:
        assert base.count(old) == 1, name
        tri_inverse.ALGORITHM = base.replace(old, new)
        run = tt.host_inverse.__wrapped__(_Tmp())
        try:
            tt.test_inverse_is_kkt_solves_scheme(run)
            print(f"NOT CAUGHT: {name}")
            missed += 1
        except AssertionError:
            print(f"caught: {name}")
    tri_inverse.ALGORITHM = base
    print(f"{len(MUTATIONS) - missed} of {len(MUTATIONS)} caught")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
