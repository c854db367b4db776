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
    assert "T.gemm(un, kq_s[b, 0:C, :], X" not in got["noupdate"]
    assert "TL_ENABLE_FAST_MATH: True" in got["fast"] and got["fast"].count("\n") == src.count("\n")
    assert got["fastp"].count("__expf") == 1 and got["fastp"].count("\n") == src.count("\n")
    assert "p_s[b, i, j] = " not in got["nowp"] and "T.barrier_arrive(p_ready[b])" in got["nowp"]
    assert "T.gemm(kq_s[b, C:2 * C, :], kq_s[b, 0:C, :], p," not in got["nowp"]
    assert got["fastp"] != got["fast"] and "__expf" not in got["nowp"]
