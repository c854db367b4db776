"""bench_serving/walk_ablations.py still finds its patterns in this checkout's walk kernel, and each
variant differs from it only where intended (CPU only; the variants are timed on the H200)."""
import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench_serving"))
import walk_ablations  # noqa: E402


def test_every_variant_applies_and_parses():
    src = (ROOT / "kernels" / "hopper" / "fused_fwd.py").read_text()
    got = walk_ablations.variants(src)
    assert set(got) == {"nowp", "noout", "noostore", "noupdate", "fast", "fastp"}
    for name, text in got.items():
        ast.parse(text, filename=f"{name}.py")
        assert text != src, name
    assert len(got["noostore"]) < len(src) and len(got["noout"]) < len(got["noostore"])
    update = "T.gemm(un, kq_s[b, 0:C, :], X"            # the default walk's (one more in QLA_O_WG's form)
    assert got["noupdate"].count(update) == src.count(update) - 1
    assert "TL_ENABLE_FAST_MATH: True" in got["fast"] and got["fast"].count("\n") == src.count("\n")
    assert got["fastp"].count("__expf") == 1 and got["fastp"].count("\n") == src.count("\n")
    assert "p_s[b, i, j] = " not in got["nowp"] and "T.barrier_arrive(p_ready[b])" in got["nowp"]
    p_product = "T.gemm(kq_s[b, C:2 * C, :], kq_s[b, 0:C, :], p,"
    assert got["nowp"].count(p_product) == src.count(p_product) - 1
    assert got["fastp"] != got["fast"] and "__expf" not in got["nowp"]
