"""The serving benchmark runner end to end on vLLM's CPU build (issue 7's CPU smoke test).

Smallest preset, one backend pair (qla, auto), two workloads, a few requests: the JSON, the
markdown and the PNG plots must exist, hold zero failed requests and a GDN share for both backends;
a second run must resume (skip every cell) without starting a server.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ["prompt-256-c1", "mixed-c3"]


def run(out: Path, *extra: str) -> int:
    sys.path.insert(0, str(ROOT / "bench_serving"))
    import serve

    return serve.main(["--preset", "cpu-smoke", "--backends", "qla,auto", "--workloads", ",".join(WORKLOADS),
                       "--out", str(out), *extra])


def test_runner_cpu_smoke(tiny_model_dir, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "bench"
    assert run(out, "--model", str(tiny_model_dir), "--fresh") == 0
    report = json.loads((out / "results.json").read_text())
    assert set(report["cells"]) == {"qla", "auto"}
    for b in ("qla", "auto"):
        assert set(report["cells"][b]) == set(WORKLOADS)
        for w, s in report["cells"][b].items():
            assert s["failed"] == 0 and s["requests"] > 0, (b, w, s["errors"])
            assert s["ttft_ms"]["p50"] > 0 and s["tpot_ms"]["p50"] > 0
            g = s["gdn"]
            assert g["steps"] > 0 and g["gdn_ms_per_step"] > 0, (b, w, g)
            assert 0 < g["share_of_step"] < 1, (b, w, g)
            assert g["backend_path"] == (["qla"] if b == "qla" else ["vllm"])
    assert report["cells"]["qla"]["prompt-256-c1"]["qla_calls"] > 0
    assert 0 < report["cells"]["qla"]["prompt-256-c1"]["gdn"]["share_of_ttft"] < 1
    md = (out / "summary.md").read_text()
    assert "GDN prefill share" in md and "| qla | prompt-256-c1 |" in md and "Failed requests: 0." in md
    for png in ("latency_vs_prompt_len.png", "latency_vs_concurrency.png", "gdn_share.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png

    # Resume: every cell is there, so no server starts and the results stay as they were.
    capsys.readouterr()
    assert run(out, "--model", str(tiny_model_dir)) == 0
    log = capsys.readouterr().out
    assert "healthy after" not in log and "resume:" in log
    assert json.loads((out / "results.json").read_text())["cells"] == report["cells"]
