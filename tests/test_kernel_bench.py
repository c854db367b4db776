"""bench_serving/kernel_bench.py's host-side pieces on the CPU: the GPU-busy union and issue 3's target
counts over both the wall-time and the GPU-busy ratios."""
import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench_serving"))
import kernel_bench  # noqa: E402


def test_nothing_in_the_checkout_shadows_an_installed_or_stdlib_module():
    # bench_serving's scripts run with their folder first on sys.path (`python bench_serving/x.py`, and
    # these tests), so a script named like an installed top-level package hides it from every library
    # that imports it: transformers 5.25 imports Hugging Face's `kernels`, which this script shadowed
    # while it was called kernels.py (CI, 2026-12-03). The root's kernels/ folder would too, were the
    # root on sys.path (conftest.py takes it off).
    taken = set(importlib.metadata.packages_distributions()) | set(sys.stdlib_module_names)
    scripts = {p.stem for p in (ROOT / "bench_serving").glob("*.py")}
    assert "transformers" in taken                     # the check sees the installed packages at all
    assert not scripts & taken, f"bench_serving scripts named like installed modules: {sorted(scripts & taken)}"
    spec = importlib.util.find_spec("kernels")
    if spec is not None:                               # Hugging Face's, or nothing; never ROOT/kernels
        where = Path(spec.origin).parent if spec.origin else Path(next(iter(spec.submodule_search_locations)))
        assert where.resolve() != ROOT / "kernels", f"`kernels` resolves to the checkout's folder: {where}"


def test_busy_us_is_the_union_of_the_spans():
    assert kernel_bench.busy_us([]) == 0.0
    assert kernel_bench.busy_us([(20, 25), (0, 10), (5, 15)]) == pytest.approx(20)     # overlap counted once
    assert kernel_bench.busy_us([(0, 10), (2, 3), (10, 12)]) == pytest.approx(12)      # nested, touching
    assert kernel_bench.busy_us([(0, 1), (5, 6)]) == pytest.approx(2)                  # the gap is not busy


def test_mixes_are_named_or_ad_hoc():
    assert kernel_bench.mix_seqlens("1024x8") == [1024] * 8                      # a named mix
    assert kernel_bench.mix_seqlens("16384+64*16") == [16384] + [16] * 64        # COUNT*LENGTH terms
    assert kernel_bench.mix_seqlens("2048+16*128") == [2048] + [128] * 16
    for bad in ("1024y8", "4+0", "+", "2*"):
        with pytest.raises(SystemExit, match="--mixes"):
            kernel_bench.mix_seqlens(bad)


def _row(heads, seqlens, q, fq, qg=None, fqg=None, qs=1.0, fqs=2.0):
    return {"heads": heads, "mix": "m", "seqlens": seqlens, "qla_ms": q, "flashqla_ms": fq,
            "qla_over_flashqla": q / fq, "qla_over_flashqla_gpu": (qg / fqg) if qg and fqg else None,
            "flashqla_serving_over_qla_serving": fqs / qs, "fla_ms": None, "flashinfer_ms": None,
            "qla_serving_ms": qs, "fla_serving_ms": None, "flashqla_serving_ms": fqs, "flashinfer_serving_ms": None}


def test_targets_count_wall_and_gpu_ratios(tmp_path):
    rows = [_row("16/32", [8192] * 4, 0.5, 0.7, qg=0.5, fqg=0.55),     # wall 0.71 meets, GPU 0.91 not
            _row("16/32", [8192] * 4, 0.6, 0.7, qg=0.4, fqg=0.6),      # wall 0.86 not, GPU 0.67 meets
            _row("2/8", [32768], 0.1, 1.0, qs=0.1, fqs=0.4),           # N·HV = 8: not counted in (a)
            _row("16/32", [512] * 16, 0.5, 0.5)]                       # no GPU ratio: wall only
    a, b = kernel_bench.targets(rows)
    assert a.endswith(": 1 of 3; on GPU-busy time: 1 of 2")
    assert b.endswith(": 1 of 4")
    out = tmp_path / "k.md"
    kernel_bench.write_markdown({"gpu": "g", "versions": {}, "command": "c", "rows": rows}, out)
    text = out.read_text()
    assert "| 16/32 | m | 0.500 |" in text and "QLA/FlashQLA GPU" in text and "0.909" in text


def test_prewarm_runs_one_worker_per_heads_and_mix_at_most_jobs_at_once(monkeypatch):
    """FlashQLA's prewarm: every (heads, mix) pair gets its own worker, never more than ``jobs``
    alive at once, each leading its own process group, and a worker still running at the deadline
    is killed with its group (its nvcc children with it)."""
    started, alive, killed_groups = [], [], []

    class FakeProc:
        def __init__(self, argv, **kw):
            self.argv, self.kw, self.polls, self.killed = argv, kw, 0, False
            self.pid = 1000 + len(started)
            started.append(self)
            alive.append(self)
            assert len([p for p in alive if p.polls < 2 and not p.killed]) <= 3

        def poll(self):
            self.polls += 1
            if self.polls >= 2 and self in alive:
                alive.remove(self)
            return 0 if self.polls >= 2 else None

        def wait(self):
            return 0

    def killpg(pid, sig):
        killed_groups.append((pid, sig))
        for p in started:
            if p.pid == pid:
                p.killed = True

    monkeypatch.setattr(kernel_bench.subprocess, "Popen", FakeProc)
    monkeypatch.setattr(kernel_bench.os, "killpg", killpg)
    monkeypatch.setattr(kernel_bench.time, "sleep", lambda s: None)
    kernel_bench.prewarm([(16, 32), (2, 8)], ["1x8192", "8192x4", "16x512"], jobs=3)
    got = sorted((p.argv[p.argv.index("--prewarm-worker") + 1], p.argv[-1]) for p in started)
    assert got == sorted((h, m) for h in ("16,32", "2,8") for m in ("1x8192", "8192x4", "16x512"))
    assert all(p.kw.get("start_new_session") for p in started) and killed_groups == []

    class Stuck(FakeProc):
        def poll(self):
            return None

    started.clear()
    alive.clear()
    clock = iter(range(0, 1000, 50))
    monkeypatch.setattr(kernel_bench.subprocess, "Popen", Stuck)
    monkeypatch.setattr(kernel_bench.time, "time", lambda: next(clock))
    kernel_bench.prewarm([(16, 32)], ["1x8192", "8192x4"], timeout_s=120, jobs=1)
    assert len(started) == 1 and started[0].killed                   # the deadline: killed, none after
    assert killed_groups == [(started[0].pid, kernel_bench.signal.SIGKILL)]


def test_rows_that_disagree_with_fla_are_named_in_the_markdown(tmp_path):
    """The per-row QLA-vs-FLA check: the worst row is reported, a row over the tolerance (or NaN:
    an unwritten, poisoned output) is named; rows without the check leave the section out."""
    a = torch.ones(4, 8)
    assert kernel_bench.rel_l2(a, a) == 0.0
    assert kernel_bench.rel_l2(a * 1.01, a) == pytest.approx(0.01)
    assert kernel_bench.rel_l2(torch.full_like(a, float("nan")), a) != kernel_bench.rel_l2(torch.full_like(a, float("nan")), a)
    rows = [_row("2/8", [32768], 0.2, 0.3), _row("4/16", [28672, 4096], 0.3, 0.4), _row("8/32", [8192], 0.3, 0.4)]
    assert kernel_bench.agreement_lines(rows) == []
    rows[0].update(qla_vs_fla_o=3e-3, qla_vs_fla_state=2e-3)
    rows[1].update(qla_vs_fla_o=0.2, qla_vs_fla_state=4e-3)
    rows[2].update(qla_vs_fla_o=float("nan"), qla_vs_fla_state=1e-3)
    out = tmp_path / "k.md"
    kernel_bench.write_markdown({"gpu": "g", "versions": {}, "command": "c", "rows": rows}, out)
    text = out.read_text()
    assert "QLA vs FLA on every row's own inputs" in text and "over 0.01: 2" in text
    assert "- DISAGREE 4/16 m: o 2.00e-01" in text and "- DISAGREE 8/32 m: o nan" in text
    assert "DISAGREE 2/8" not in text and "worst 8/32 m" in text


def test_isolate_runs_each_backend_in_its_own_process_and_merges_its_fields(monkeypatch, tmp_path):
    """``--isolate``: one child per backend (its own --backends, no prewarm/accuracy/agreement),
    each row's fields taken from the child that owns them; a row no child timed is left out."""
    import json
    import types
    calls = []

    def fake_call(cmd):
        calls.append(cmd)
        b = cmd[cmd.index("--backends") + 1]
        out = Path(cmd[cmd.index("--out") + 1])
        out.mkdir(parents=True)
        rows = [{"heads": "16/32", "mix": "64x128", "seqlens": [128] * 64, f"{b}_ms": 1.0 + len(calls),
                 f"{b}_serving_ms": 2.0, "qla_ms": None if b != "qla" else 1.0 + len(calls),
                 "qla_over_flashqla": None}]
        json.dump({"rows": rows}, open(out / "kernels.json", "w"))
        return 0

    monkeypatch.setattr(kernel_bench.subprocess, "call", fake_call)
    args = types.SimpleNamespace(budget_s=100.0, out=str(tmp_path))
    mixes = {"64x128": [128] * 64, "1x8192": [8192]}
    rows = kernel_bench.time_isolated(args, [(16, 32)], mixes, ["qla", "flashqla"], kernel_bench.time.time())
    assert [c[c.index("--backends") + 1] for c in calls] == ["qla", "flashqla"]
    assert all("--no-prewarm" in c and "--no-agreement" in c and "--no-accuracy" in c for c in calls)
    assert len(rows) == 1 and rows[0]["mix"] == "64x128"
    assert rows[0]["qla_ms"] == 2.0 and rows[0]["flashqla_ms"] == 3.0 and rows[0]["fla_ms"] is None


def test_cp_sweep_takes_named_and_ad_hoc_rows():
    """--cp-sweep --mixes: its own row names, or any mix_seqlens form (session 38's 3072…6144 rows)."""
    assert kernel_bench.cp_seqlens("1x8192") == kernel_bench.CP_SEQLENS["1x8192"]
    assert kernel_bench.cp_seqlens("3072") == [3072]
    assert kernel_bench.cp_seqlens("4096+2*16") == [4096, 16, 16]
    with pytest.raises(SystemExit):
        kernel_bench.cp_seqlens("nonsense")


def test_flashinfer_gpu_section_lists_only_rows_flashinfer_ran(tmp_path):
    """FlashInfer's rows get their own GPU-busy comparison with its routing (CP or not); rows it
    did not run, and tables without it, leave the section out."""
    rows = [_row("16/32", [8192] * 4, 0.44, 0.6), _row("2/8", [32768], 0.2, 0.3)]
    rows[1]["qla_gpu_ms"] = 0.15
    out = tmp_path / "k.md"
    kernel_bench.write_markdown({"gpu": "g", "versions": {}, "command": "c", "rows": rows}, out)
    assert "QLA against FlashInfer on GPU-busy time" not in out.read_text()
    rows[0].update(qla_gpu_ms=0.44, flashinfer_ms=0.40, flashinfer_gpu_ms=0.373, flashinfer_cp=False)
    kernel_bench.write_markdown({"gpu": "g", "versions": {}, "command": "c", "rows": rows}, out)
    text = out.read_text()
    assert "QLA against FlashInfer on GPU-busy time" in text
    assert "| 16/32 | m | 0.440 | 0.373 | 1.180 | False |" in text
    assert "| 2/8 | m | 0.150 |" not in text


def test_merge_takes_whole_runs_or_the_named_head_configs(tmp_path, monkeypatch):
    """``--merge PATH:HEADS`` keeps only those head configs' rows of that run (each config whole from
    one run); a plain PATH keeps every row. Every merged row names its file."""
    monkeypatch.setattr(kernel_bench, "plot", lambda result, path: None)
    run_a = {"gpu": "g", "versions": {}, "command": "a",
             "rows": [_row("16/32", [8192] * 4, 0.44, 0.6), _row("4/16", [32768], 0.2, 0.3)]}
    run_b = {"gpu": "g", "versions": {}, "command": "b", "rows": [_row("4/16", [32768], 0.25, 0.4)]}
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps(run_a))
    pb.write_text(json.dumps(run_b))
    kernel_bench.merge([f"{pa}:16/32", str(pb)], str(tmp_path / "out"))
    got = json.loads((tmp_path / "out" / "kernels.json").read_text())
    assert [(r["heads"], r["qla_ms"], r["source"]) for r in got["rows"]] == [("16/32", 0.44, str(pa)),
                                                                            ("4/16", 0.25, str(pb))]
    assert got["command"] == "a ; b"
    kernel_bench.merge([f"{pa}:2/8,4/16"], str(tmp_path / "out2"))
    got = json.loads((tmp_path / "out2" / "kernels.json").read_text())
    assert [r["heads"] for r in got["rows"]] == ["4/16"]
