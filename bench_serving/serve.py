"""Serving latency, vLLM's own GDN prefill vs ``--attention-backend qla``: TTFT / TPOT / ITL / E2E.

For each backend: start ``vllm serve`` on 127.0.0.1, wait for health, warm up, drive it with a
streaming aiohttp client (token-id prompts of fixed lengths, greedy, ``ignore_eos``), stop the
server by PID. Prints a p50/p90/p99 table and writes ``<out>/results.json`` and ``<out>/summary.md``.

CPU (the default; vLLM's CPU build, tiny Qwen3-Next built locally, a few minutes on 2 cores)::

    bash bench_serving/run_cpu.sh                       # venv + model + this runner
    .venv-vllm/bin/python bench_serving/serve.py        # same, venv already built

Backends: ``vllm`` (no plugin flags: vLLM's own GDN path) and ``qla`` (``--attention-backend qla``);
``triton`` / ``flashinfer`` (``--gdn-prefill-backend ...``) are for CUDA machines. The qla server
writes a trace (``QLA_VLLM_TRACE``) so the table can say how many prefill calls qla-serve served.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from server import VLLMServer  # noqa: E402

BACKEND_ARGS = {
    "vllm": [],
    "qla": ["--attention-backend", "qla"],
    "triton": ["--gdn-prefill-backend", "triton"],
    "flashinfer": ["--gdn-prefill-backend", "flashinfer"],
}
METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
PCTS = (50, 90, 99)


@dataclass
class Workload:
    name: str
    prompt_len: int
    concurrency: int
    num_requests: int
    output_len: int


@dataclass
class RequestResult:
    prompt_len: int
    output_tokens: int
    ttft_ms: float
    e2e_ms: float
    itl_ms: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def tpot_ms(self) -> float | None:
        if self.output_tokens < 2:
            return None
        return (self.e2e_ms - self.ttft_ms) / (self.output_tokens - 1)


def default_workloads(prompt_lens: list[int], concurrency: list[int], num_requests: int, output_len: int) -> list[Workload]:
    out = []
    for c in concurrency:
        for L in prompt_lens:
            out.append(Workload(f"p{L}-c{c}", L, c, max(num_requests, c), output_len))
    return out


def make_prompts(n: int, length: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, 2048) for _ in range(length)] for _ in range(n)]


async def _one(session, url: str, model: str, ids: list[int], output_len: int) -> RequestResult:
    body = {"model": model, "prompt": ids, "max_tokens": output_len, "temperature": 0.0,
            "ignore_eos": True, "stream": True}
    t0 = time.perf_counter()
    ttft = None
    last = t0
    itl: list[float] = []
    n = 0
    try:
        async with session.post(url + "/v1/completions", json=body) as r:
            if r.status != 200:
                return RequestResult(len(ids), 0, 0.0, 0.0, error=f"HTTP {r.status}: {(await r.text())[:200]}")
            async for raw in r.content:
                line = raw.decode().strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if not chunk.get("choices") or chunk["choices"][0].get("text") is None:
                    continue
                now = time.perf_counter()
                if ttft is None:
                    ttft = now - t0
                else:
                    itl.append((now - last) * 1e3)
                last = now
                n += 1
    except Exception as exc:  # report, do not crash the run
        return RequestResult(len(ids), n, 0.0, 0.0, error=repr(exc))
    e2e = time.perf_counter() - t0
    return RequestResult(len(ids), n, (ttft or e2e) * 1e3, e2e * 1e3, itl)


async def run_workload(url: str, model: str, wl: Workload, seed: int, progress=None) -> list[RequestResult]:
    import aiohttp

    prompts = make_prompts(wl.num_requests, wl.prompt_len, seed)
    sem = asyncio.Semaphore(wl.concurrency)
    timeout = aiohttp.ClientTimeout(total=1800)

    async with aiohttp.ClientSession(timeout=timeout) as session:
        async def limited(ids):
            async with sem:
                res = await _one(session, url, model, ids, wl.output_len)
                if progress is not None:
                    progress.update(1)
                return res

        return await asyncio.gather(*(limited(p) for p in prompts))


def percentile(xs: list[float], p: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summarize(results: list[RequestResult]) -> dict:
    ok = [r for r in results if r.error is None]
    series = {
        "ttft_ms": [r.ttft_ms for r in ok],
        "tpot_ms": [r.tpot_ms for r in ok if r.tpot_ms is not None],
        "itl_ms": [x for r in ok for x in r.itl_ms],
        "e2e_ms": [r.e2e_ms for r in ok],
    }
    out = {"requests": len(results), "failed": len(results) - len(ok),
           "errors": sorted({r.error for r in results if r.error})[:5]}
    for m, xs in series.items():
        out[m] = {f"p{p}": percentile(xs, p) for p in PCTS}
        out[m]["mean"] = statistics.fmean(xs) if xs else None
    return out


def count_trace(path: Path) -> dict:
    if not path.exists():
        return {"calls": 0, "tokens": 0}
    calls = tokens = 0
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        calls += 1
        tokens += rec["tokens"]
    return {"calls": calls, "tokens": tokens}


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def table(report: dict) -> str:
    head = "| backend | workload | reqs | fail | " + " | ".join(
        f"{m.split('_')[0].upper()} p{p}" for m in METRICS for p in PCTS) + " |"
    sep = "|" + "---|" * (4 + len(METRICS) * len(PCTS))
    rows = [head, sep]
    for b, per in report["backends"].items():
        for wname, s in per["workloads"].items():
            rows.append(f"| {b} | {wname} | {s['requests']} | {s['failed']} | " + " | ".join(
                fmt(s[m][f"p{p}"]) for m in METRICS for p in PCTS) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=ROOT / ".work" / "tiny-qwen3-next",
                    help="model folder (built here with tiny_model.py if it is missing)")
    ap.add_argument("--backends", default="vllm,qla", help=f"comma list of {', '.join(BACKEND_ARGS)}")
    ap.add_argument("--prompt-lens", default="128,512,2000")
    ap.add_argument("--concurrency", default="1,4")
    ap.add_argument("--num-requests", type=int, default=4, help="requests per workload (≥ concurrency)")
    ap.add_argument("--output-len", type=int, default=16)
    ap.add_argument("--max-num-batched-tokens", type=int, default=512)
    ap.add_argument("--extra-args", default="", help="more `vllm serve` args for every backend")
    ap.add_argument("--eager", action=argparse.BooleanOptionalAction, default=True,
                    help="--enforce-eager (default on: CPU compile takes minutes)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "cpu")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from tqdm import tqdm

    import tiny_model

    if not (args.model / tiny_model.MARKER).exists() and not (args.model / "config.json").exists():
        print(f"building tiny Qwen3-Next model in {args.model}", flush=True)
        tiny_model.build(args.model, seed=args.seed)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    for b in backends:
        if b not in BACKEND_ARGS:
            ap.error(f"unknown backend {b!r}; choose from {', '.join(BACKEND_ARGS)}")
    workloads = default_workloads([int(x) for x in args.prompt_lens.split(",")],
                                  [int(x) for x in args.concurrency.split(",")], args.num_requests, args.output_len)
    common = ["--max-model-len", "4096", "--max-num-batched-tokens", str(args.max_num_batched_tokens),
              "--seed", str(args.seed), *args.extra_args.split()]
    if args.eager:
        common.append("--enforce-eager")
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"model": str(args.model), "host": platform.node(), "cpu_count": os.cpu_count(),
              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "common_args": common,
              "workloads": [asdict(w) for w in workloads], "backends": {},
              "loadavg_start": os.getloadavg()}

    for b in backends:
        trace = args.out / f"trace-{b}.jsonl"
        trace.unlink(missing_ok=True)
        env = {"QLA_VLLM_TRACE": str(trace)} if b == "qla" else {}
        t0 = time.perf_counter()
        print(f"[{b}] starting vllm serve {' '.join(BACKEND_ARGS[b] + common)}", flush=True)
        with VLLMServer(args.model, BACKEND_ARGS[b] + common, env=env, log_path=args.out / f"server-{b}.log") as srv:
            startup_s = time.perf_counter() - t0
            print(f"[{b}] healthy after {startup_s:.0f}s (pid {srv.proc.pid}); warming up", flush=True)
            for L in sorted({w.prompt_len for w in workloads}):   # first touch of each shape
                asyncio.run(run_workload(srv.url, srv.served_name, Workload("warmup", L, 1, 1, 4), args.seed + 99))
            per: dict[str, dict] = {}
            total = sum(w.num_requests for w in workloads)
            with tqdm(total=total, desc=f"{b}", unit="req") as bar:
                for i, wl in enumerate(workloads):
                    res = asyncio.run(run_workload(srv.url, srv.served_name, wl, args.seed + i, bar))
                    per[wl.name] = summarize(res)
        report["backends"][b] = {"args": BACKEND_ARGS[b], "startup_s": startup_s, "workloads": per,
                                 "qla_trace": count_trace(trace) if b == "qla" else None}

    report["loadavg_end"] = os.getloadavg()
    md = table(report)
    notes = []
    for b, per in report["backends"].items():
        if per["qla_trace"] is not None:
            t = per["qla_trace"]
            notes.append(f"- `{b}`: qla-serve served {t['calls']} GDN prefill calls ({t['tokens']} tokens) in the worker.")
        failed = sum(s["failed"] for s in per["workloads"].values())
        if failed:
            notes.append(f"- `{b}`: {failed} failed requests.")
    text = (f"# Serving latency (ms), {report['started']}\n\nModel `{args.model.name}`; vllm serve "
            f"`{' '.join(common)}`; {args.output_len} output tokens, greedy, ignore_eos. One server at a time; "
            f"{os.cpu_count()} CPUs, load average {report['loadavg_start'][0]:.1f} → {report['loadavg_end'][0]:.1f} "
            f"(other processes on the host skew these figures).\n\n{md}\n\n" + "\n".join(notes) + "\n")
    (args.out / "results.json").write_text(json.dumps(report, indent=1))
    (args.out / "summary.md").write_text(text)
    print()
    print(text)
    print(f"wrote {args.out / 'results.json'} and {args.out / 'summary.md'}")
    return 0 if all(s["failed"] == 0 for per in report["backends"].values() for s in per["workloads"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
