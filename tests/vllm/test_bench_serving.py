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
            # three GDN layers a step: the first layer's time and the mean of the other two
            assert g["first_layer_ms_per_step"] > 0 and g["other_layers_ms_per_step"] > 0, (b, w, g)
            # the thread's own CPU time in a layer is part of its host time
            assert 0 < g["first_layer_cpu_ms"] <= g["first_layer_host_ms"] * 1.05, (b, w, g)
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


def test_paired_server_runs_each_side_on_its_own_path(tiny_model_dir, tmp_path):
    """One real ``paired`` server: steps of qla-serve's side run qla-serve (its trace, its step
    label), steps of the other side run vLLM's path and never call qla-serve."""
    sys.path.insert(0, str(ROOT / "bench_serving"))
    import serve

    out = tmp_path / "paired"
    assert serve.main(["--preset", "cpu-smoke", "--backends", "paired", "--workloads", "prompt-256-c1,mixed-c3",
                       "--model", str(tiny_model_dir), "--out", str(out), "--no-plots", "--fresh"]) == 0
    report = json.loads((out / "results.json").read_text())
    assert set(report["cells"]) == {"paired:qla", "paired:auto"}
    calls = [json.loads(x)["t"] for x in (out / "trace-paired.jsonl").read_text().splitlines()]
    for side, path in (("qla", "qla"), ("auto", "vllm")):
        for w in WORKLOADS:
            s = report["cells"][f"paired:{side}"][w]
            assert s["failed"] == 0 and s["requests"] > 0, (side, w, s["errors"])
            assert s["gdn"]["steps"] > 0 and s["gdn"]["backend_path"] == [path], (side, w, s["gdn"])
            inside = sum(1 for t in calls if any(t0 <= t <= t1 for t0, t1 in s["windows"]))
            assert (inside > 0) if side == "qla" else (inside == 0), (side, w, inside)
    assert "## Paired: qla-serve and vLLM's path in one server" in (out / "summary.md").read_text()


def test_warm_up_sends_each_batch_shape_and_a_prefix_hit_batch(monkeypatch):
    """The warm-up must build what the timed windows will hit: every length alone, then a rehearsal
    of each workload at its concurrency and full output length (2 × concurrency requests, at most
    the workload's count; a stream at least a timed block, half its count), a prefix workload's
    rehearsal reusing a prefix cached just before."""
    sys.path.insert(0, str(ROOT / "bench_serving"))
    import serve

    calls = []

    async def fake_drive(url, model, prompts, concurrency, output_len, progress=None):
        calls.append((prompts, concurrency, output_len))
        return []

    monkeypatch.setattr(serve, "drive", fake_drive)
    srv = type("Srv", (), {"url": "http://127.0.0.1:1", "served_name": "m"})()
    workloads = [serve.fixed(256, 5, 2), serve.mixed([32, 96], 3, 20, 6), serve.prefix(64, [16, 48], 2, 3, 7)]
    serve.warm_up(srv, workloads, seed=1, vocab=100)
    lengths = sorted(len(p) for p in calls[0][0])
    assert lengths == [32, 96, 112, 256] and calls[0][1] == 1          # each prompt length alone
    fixed_batch, mixed_batch, cached, prefix_batch = calls[1:]
    assert fixed_batch[1:] == (1, 2) and [len(p) for p in fixed_batch[0]] == [256, 256]
    assert mixed_batch[1:] == (3, 6) and len(mixed_batch[0]) == 10 and {len(p) for p in mixed_batch[0]} <= {32, 96}
    assert len(cached[0]) == 1 and len(cached[0][0]) == 64              # the prefix, cached first
    assert prefix_batch[1:] == (2, 7) and len(prefix_batch[0]) == 3     # capped at the workload's 3
    assert all(p[:64] == cached[0][0] and len(p) - 64 in (16, 48) for p in prefix_batch[0])
    # rehearsal prompts are fresh: none equals a timed prompt of the same workload
    timed = workloads[1].prompts(0 + sum(map(ord, workloads[1].name)), 100)
    assert not any(p in timed for p in mixed_batch[0])


def test_a_second_server_of_a_backend_is_its_own_column_and_sets_the_noise_floor():
    """``auto@2`` runs vLLM's default again with the same flags; the report keeps it apart, never
    counts a qla repeat as a baseline, and prints the spread between the two servers."""
    sys.path.insert(0, str(ROOT / "bench_serving"))
    import serve

    assert serve.parse_backends("qla, vllm ,triton,auto@2,qla@2") == ["qla", "auto", "triton", "auto@2", "qla@2"]
    for bad, what in (("auto@1", "K >= 2"), ("auto@x", "K >= 2"), ("auto,auto", "twice"), ("fa", "unknown backend")):
        with pytest.raises(ValueError, match=what):
            serve.parse_backends(bad)

    def cell(ttft, tpot):
        q = {"p50": ttft, "p90": ttft, "p99": ttft}
        return {"requests": 3, "failed": 0, "ttft_ms": q, "tpot_ms": {"p50": tpot, "p90": tpot, "p99": tpot},
                "itl_ms": q, "e2e_ms": q, "gdn": {"gdn_ms_per_step": 1.0}}

    w = serve.fixed(2048, 3, 8)
    report = {"config": {"preset": "x", "model": "m", "common_args": []}, "updated": "now",
              "host": {"node": "n", "cpu_count": 1}, "workloads": [serve.asdict(w)],
              "cells": {"qla": {w.name: cell(50.0, 2.0)}, "auto": {w.name: cell(60.0, 2.5)},
                        "auto@2": {w.name: cell(48.0, 3.0)}, "qla@2": {w.name: cell(40.0, 2.0)}}}
    md = serve.markdown(report)
    assert "- `auto@2`: vLLM's default GDN prefill" in md and "a second server of it" in md
    cmp = md.split("## qla vs the best baseline")[1].split("##")[0]
    assert "| prompt-2k-c1 | qla | 50.0 | 48.0 (auto@2) | 1.04 |" in cmp   # qla@2's 40 ms is no baseline
    assert "| prompt-2k-c1 | qla@2 | 40.0 | 48.0 (auto@2) | 0.83 |" in cmp
    noise = md.split("## Same settings, another server (noise floor)")[1]
    assert "| auto | prompt-2k-c1 | 60.0 / 48.0 | 1.25 | 2.5 / 3.0 | 1.20 |" in noise
    assert "| qla | prompt-2k-c1 | 50.0 / 40.0 | 1.25 |" in noise
    assert serve.parse_backends("qla-nocp,auto") == ["qla-nocp", "auto"]
    report["cells"]["qla-nocp"] = {w.name: cell(45.0, 2.0)}
    cmp = serve.markdown(report).split("## qla vs the best baseline")[1].split("##")[0]
    assert "| prompt-2k-c1 | qla-nocp | 45.0 | 48.0 (auto@2) | 0.94 |" in cmp    # also never a baseline


def test_each_server_gets_its_backends_flags_and_environment(monkeypatch, tmp_path):
    """qla-nocp is qla's flag with QLA_CP=0 in the server's environment, qla-conv with
    QLA_VLLM_CONV=qla, both traced like qla; a baseline gets no qla-serve trace."""
    sys.path.insert(0, str(ROOT / "bench_serving"))
    import serve

    started = []

    class FakeServer:
        def __init__(self, model, args, env=None, log_path=None, startup_timeout=None):
            started.append((list(args), dict(env or {})))
            self.proc = None

        def start(self):
            raise KeyboardInterrupt          # stands for the deadline: nothing is measured

        def stop(self):
            pass

    monkeypatch.setattr(serve, "VLLMServer", FakeServer)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    for backend in ("qla-nocp", "auto", "qla-conv"):
        rc = serve.main(["--preset", "cpu-smoke", "--backends", backend, "--workloads", "prompt-256-c1",
                         "--model", str(model), "--out", str(tmp_path / backend), "--no-plots"])
        assert rc == 130
    (nocp_args, nocp_env), (auto_args, auto_env), (conv_args, conv_env) = started
    assert nocp_args[:2] == ["--attention-backend", "qla"] and nocp_env["QLA_CP"] == "0"
    assert conv_args[:2] == ["--attention-backend", "qla"] and conv_env["QLA_VLLM_CONV"] == "qla"
    assert "QLA_VLLM_TRACE" in conv_env and "QLA_CP" not in conv_env
    assert "QLA_VLLM_TRACE" in nocp_env and "QLA_VLLM_STEP_TIMING" in nocp_env
    assert "--attention-backend" not in auto_args and "QLA_CP" not in auto_env and "QLA_VLLM_TRACE" not in auto_env


def test_median_ci_brackets_the_median_and_reaches_the_comparison_table():
    """The p50's distribution-free interval: order statistics around the median, wider for fewer
    samples, none under 6; the qla-vs-baseline table prints it beside each p50."""
    sys.path.insert(0, str(ROOT / "bench_serving"))
    import random

    import serve

    assert serve.median_ci([1.0] * 5) is None
    rng = random.Random(4)
    xs = [rng.gauss(100.0, 10.0) for _ in range(32)]
    lo, hi = serve.median_ci(xs)
    med = serve.percentile(xs, 50)
    assert lo < med < hi and sorted(xs).index(lo) == 9 and sorted(xs).index(hi) == 22
    wide = serve.median_ci(xs[:8])
    assert wide[0] <= lo or wide[1] >= hi
    res = [serve.RequestResult(10, 8, ttft, ttft + 70.0, [10.0] * 7) for ttft in xs]
    s = serve.summarize(res)
    assert s["ttft_ms"]["p50_ci"] == [lo, hi]
    w = serve.fixed(2048, 32, 8)
    base = serve.summarize([serve.RequestResult(10, 8, t + 20.0, t + 90.0, [11.0] * 7) for t in xs])
    report = {"config": {"preset": "x", "model": "m", "common_args": []}, "updated": "now",
              "host": {"node": "n", "cpu_count": 1}, "workloads": [serve.asdict(w)],
              "cells": {"qla": {w.name: s}, "auto": {w.name: base}}}
    cmp = serve.markdown(report).split("## qla vs the best baseline")[1]
    assert f"| {serve.fmt(med)} [{serve.fmt(lo)}, {serve.fmt(hi)}] | " in cmp


def test_servers_of_one_backend_are_pooled_request_by_request():
    """With NAME@K servers the report pools every request of a backend's servers and sets qla's
    pooled TTFT p50 against the best pooled baseline; cells without samples are left out."""
    sys.path.insert(0, str(ROOT / "bench_serving"))
    import serve

    def cell(ttfts):
        return serve.summarize([serve.RequestResult(10, 8, t, t + 70.0, [10.0] * 7) for t in ttfts])

    w = serve.fixed(2048, 8, 8)
    report = {"config": {"preset": "x", "model": "m", "common_args": []}, "updated": "now",
              "host": {"node": "n", "cpu_count": 1}, "workloads": [serve.asdict(w)],
              "cells": {"qla": {w.name: cell([40.0 + i for i in range(8)])},
                        "qla@2": {w.name: cell([50.0 + i for i in range(8)])},
                        "auto": {w.name: cell([60.0 + i for i in range(8)])},
                        "auto@2": {w.name: cell([70.0 + i for i in range(8)])},
                        "triton": {w.name: cell([55.0 + i for i in range(8)])}}}
    md = serve.markdown(report)
    pooled = md.split("## Pooled over servers")[1]
    qla_med = serve.percentile([40.0 + i for i in range(8)] + [50.0 + i for i in range(8)], 50)
    best = serve.percentile([55.0 + i for i in range(8)], 50)        # triton (one server) beats pooled auto
    assert f"| prompt-2k-c1 | qla | 2 | {serve.fmt(qla_med)} [" in pooled
    assert f"| {serve.fmt(qla_med / best, '.2f')} (triton) |" in pooled
    assert "| prompt-2k-c1 | auto | 2 |" in pooled and "| prompt-2k-c1 | triton | 1 |" in pooled
    del report["cells"]["qla@2"][w.name]["samples"]                  # an old cell: qla drops out
    assert "| prompt-2k-c1 | qla |" not in serve.markdown(report).split("## Pooled over servers")[1]


@pytest.mark.parametrize("kind,other,env", [("paired", "auto", {}),
                                            ("paired-triton", "triton", {"QLA_VLLM_FALLBACK_PREFILL": "triton"})])
def test_paired_server_alternates_its_sides_by_the_switch_file(kind, other, env, monkeypatch, tmp_path):
    """A ``paired`` server is one qla server whose switch file sends a step to vLLM's path
    (``paired-triton``: vLLM's Triton kernels there): every request block must run with the file
    matching its side (ABBA: per request at concurrency 1, half-stream blocks above), each side
    gets the workload's full count of its own prompts with the other side's lengths, and the report
    holds both sides as cells, in the paired table and its plot."""
    pytest.importorskip("matplotlib")
    sys.path.insert(0, str(ROOT / "bench_serving"))
    import serve

    started, sent = [], []

    class FakeServer:
        url, served_name, proc = "http://127.0.0.1:1", "m", None

        def __init__(self, model, args, env=None, log_path=None, startup_timeout=None):
            started.append((list(args), dict(env or {})))

        def start(self):
            self.proc = type("Proc", (), {"pid": 1})()

        def stop(self):
            pass

    async def fake_drive(url, model, prompts, concurrency, output_len, progress=None):
        switch = Path(started[-1][1]["QLA_VLLM_AB_SWITCH"])
        sent.append((other if switch.exists() else "qla", [tuple(p) for p in prompts], concurrency))
        base = 50.0 if switch.exists() else 40.0
        return [serve.RequestResult(len(p), output_len, base + i, base + i + 70.0, [10.0] * (output_len - 1))
                for i, p in enumerate(prompts)]

    monkeypatch.setattr(serve, "VLLMServer", FakeServer)
    monkeypatch.setattr(serve, "drive", fake_drive)
    monkeypatch.setattr(serve, "prefix_counters", lambda srv: None)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    out = tmp_path / "paired"
    rc = serve.main(["--preset", "cpu-smoke", "--backends", kind, "--workloads", "prompt-256-c1,mixed-c3",
                     "--num-requests", "8", "--model", str(model), "--out", str(out), "--one-server"])
    assert rc == 0
    (args, server_env), = started
    assert args[:2] == ["--attention-backend", "qla"] and "QLA_VLLM_TRACE" in server_env
    assert {k: server_env.get(k) for k in env} == env and ("QLA_VLLM_FALLBACK_PREFILL" in server_env) == bool(env)
    # The timed windows (after the warm-ups' and the flush's requests): c=1 one request per block
    # in ABBA order, c=3 four blocks of 4 (the 16 prompts of two sides).
    timed = [s for s in sent if s[2] in (1, 3) and len(s[1][0]) in (256, 32, 96, 200)]
    c1 = [s for s in timed if s[2] == 1 and len(s[1]) == 1 and len(s[1][0]) == 256][-16:]
    assert [s[0] for s in c1] == ["qla", other, other, "qla"] * 4
    c3 = [s for s in timed if s[2] == 3 and len(s[1]) == 4]
    assert [s[0] for s in c3] == ["qla", other, other, "qla"]
    for sides in (c1, c3):
        qla = {p for s in sides if s[0] == "qla" for p in s[1]}
        auto = {p for s in sides if s[0] == other for p in s[1]}
        assert len(qla) == len(auto) == 8 and not qla & auto       # own prompts, full count each
    # The same work on both sides: each block's twin (the next) has its prompt lengths in its order.
    assert [[len(p) for p in s[1]] for s in c3[1::2]] == [[len(p) for p in s[1]] for s in c3[0::2]]
    assert len({len(p) for s in c3 for p in s[1]}) > 1                      # a mixed draw of lengths
    assert not Path(server_env["QLA_VLLM_AB_SWITCH"]).exists()     # left on qla-serve's side
    report = json.loads((out / "results.json").read_text())
    assert set(report["cells"]) == {f"{kind}:qla", f"{kind}:{other}"}
    for side, ttft in (("qla", 41.5), (other, 51.5)):      # two blocks of 4 per side: base + 0..3
        for w in ("prompt-256-c1", "mixed-c3"):
            cell = report["cells"][f"{kind}:{side}"][w]
            assert cell["requests"] == 8 and cell["failed"] == 0
        assert report["cells"][f"{kind}:{side}"]["mixed-c3"]["ttft_ms"]["p50"] == pytest.approx(ttft)
    table = (out / "summary.md").read_text().split("## Paired: qla-serve and vLLM's path in one server")[1]
    assert f"| prompt-256-c1 | {kind} | 40.0 [40.0, 40.0] | 50.0 [50.0, 50.0] | 0.800 [0.800, 0.800] |" in table
    # TPOT beside it, with its own ratio and interval (both sides decode at 70 ms / (output − 1) here)
    row = next(r for r in table.splitlines() if r.startswith(f"| prompt-256-c1 | {kind} |"))
    assert row.split(" | ")[7] == "1.000 [1.000, 1.000]"
    assert f"| mixed-c3 | {kind} | 41.5 [" in table and f"| {41.5 / 51.5:.3f} [" in table
    assert (out / "paired_ttft_ratio.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_paired_cells_group_by_server_and_the_ratio_interval_covers_the_truth():
    sys.path.insert(0, str(ROOT / "bench_serving"))
    import random

    import serve

    assert serve.base_of("paired@2:qla") == "paired:qla" and serve.server_of("paired@2:auto") == "paired"
    assert serve.cell_labels("paired@3") == ["paired@3:qla", "paired@3:auto"] and serve.cell_labels("auto@2") == ["auto@2"]
    assert "paired:qla" in serve.QLA_BACKENDS and "paired:auto" not in serve.QLA_BACKENDS
    assert serve.cell_labels("paired-triton@2") == ["paired-triton@2:qla", "paired-triton@2:triton"]
    assert "paired-triton:qla" in serve.QLA_BACKENDS and "paired-triton:triton" not in serve.QLA_BACKENDS
    # A 95 % interval: it brackets the sample ratio always and the true ratio (0.9) in most draws.
    rng = random.Random(1)
    covered = 0
    for _ in range(60):
        a = [rng.gauss(90.0, 5.0) for _ in range(64)]
        b = [rng.gauss(100.0, 5.0) for _ in range(64)]
        lo, hi = serve.ratio_ci(a, b, reps=400)
        assert lo <= serve.percentile(a, 50) / serve.percentile(b, 50) <= hi and hi < 1.0
        covered += lo <= 0.9 <= hi
    assert covered >= 50, covered
    assert serve.ratio_ci(a[:5], b) is None


def test_the_ratio_interval_resamples_a_streams_waves_together():
    """Requests of one wave share their decode steps: the interval resamples runs of `block`
    consecutive requests, the same runs on both twin sides, and no run crosses a server."""
    sys.path.insert(0, str(ROOT / "bench_serving"))
    import random

    import serve

    assert serve.blocks_of(list(range(10)), 4) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert serve.blocks_of(list(range(10)), 4, breaks=(6,)) == [[0, 1, 2, 3], [4, 5], [6, 7, 8, 9]]
    # 32 waves of 4 identical TPOTs (as on the H200): per-request resampling sees 128 independent
    # samples and gives a narrower interval than the 32 waves support.
    rng = random.Random(3)
    waves = lambda mu: [x for _ in range(32) for x in [rng.gauss(mu, 0.3)] * 4]  # noqa: E731
    a, b = waves(2.4), waves(2.4)
    lo1, hi1 = serve.ratio_ci(a, b, reps=400)
    lo4, hi4 = serve.ratio_ci(a, b, reps=400, block=4)
    assert hi4 - lo4 > 1.3 * (hi1 - lo1)
    # Twins: a wave's level shared by both sides cancels in the paired draw, not in the unpaired one.
    level = [rng.gauss(0, 1.0) for _ in range(32)]
    a = [3 + level[i // 4] + rng.gauss(0, 0.05) for i in range(128)]
    b = [3.3 + level[i // 4] + rng.gauss(0, 0.05) for i in range(128)]
    lo_p, hi_p = serve.ratio_ci(a, b, reps=400, block=4, paired=True)
    lo_u, hi_u = serve.ratio_ci(a, b, reps=400, block=4)
    assert hi_p < 1.0 and hi_p - lo_p < hi_u - lo_u
    assert serve.ratio_ci(a[:8], b[:8], block=8) is None          # one run: nothing to resample


def test_merged_runs_pool_their_servers_under_free_labels(tmp_path):
    sys.path.insert(0, str(ROOT / "bench_serving"))
    import serve

    w = [{"name": "mixed-c4", "kind": "mixed", "concurrency": 4, "num_requests": 8, "output_len": 4,
          "prompt_lens": [16], "prefix_len": 0, "prefix_caching": False}]
    cell = lambda base: serve.summarize([serve.RequestResult(16, 4, base + i, base + i + 6.0, [2.0] * 3)  # noqa: E731
                                         for i in range(8)])
    cfg = {"preset": "h200", "model": "m", "common_args": []}
    run = lambda q, a: {"config": cfg, "workloads": w, "host": {"node": "n", "cpu_count": 2}, "started": "t",  # noqa: E731
                        "cells": {"paired:qla": {"mixed-c4": cell(q)}, "paired:auto": {"mixed-c4": cell(a)}}}
    files = []
    for i, (q, a) in enumerate(((40.0, 50.0), (60.0, 70.0))):
        files.append(tmp_path / f"r{i}.json")
        files[-1].write_text(json.dumps(run(q, a)))
    out = tmp_path / "merged"
    assert serve.main(["--merge", *map(str, files), "--out", str(out), "--no-plots"]) == 0
    report = json.loads((out / "results.json").read_text())
    assert set(report["cells"]) == {"paired:qla", "paired:auto", "paired@2:qla", "paired@2:auto"}
    assert report["cells"]["paired@2:auto"]["mixed-c4"]["ttft_ms"]["p50"] == 73.5
    assert report["merged_from"][1]["renamed"] == {"paired": "paired@2"}
    summary = (out / "summary.md").read_text()
    assert "| mixed-c4 | all 2 paired |" in summary and f"{files[1]} (servers renamed: paired → paired@2)" in summary
    other = run(1.0, 2.0) | {"config": cfg | {"model": "other"}}
    with pytest.raises(ValueError, match="model"):
        serve.merge_reports([run(1.0, 2.0), other], ["a", "b"])
    changed = run(1.0, 2.0) | {"workloads": [w[0] | {"concurrency": 16}]}
    with pytest.raises(ValueError, match="mixed-c4 differs"):
        serve.merge_reports([run(1.0, 2.0), changed], ["a", "b"])


def test_a_restarted_server_keeps_the_earlier_starts_traces(tmp_path):
    """A resumed run starts a server of the same tag again: its traces go to a new file and the
    earlier start's steps are kept beside it, numbered."""
    sys.path.insert(0, str(ROOT / "bench_serving"))
    import serve

    path = tmp_path / "trace-steps-paired-prefix.jsonl"
    serve.keep_previous(path)                      # nothing there yet: nothing to keep
    assert list(tmp_path.iterdir()) == []
    path.write_text('{"step": 1}\n')
    serve.keep_previous(path)
    path.write_text('{"step": 2}\n')
    serve.keep_previous(path)
    assert not path.exists()
    assert serve.read_jsonl(tmp_path / "trace-steps-paired-prefix.1.jsonl") == [{"step": 1}]
    assert serve.read_jsonl(tmp_path / "trace-steps-paired-prefix.2.jsonl") == [{"step": 2}]
