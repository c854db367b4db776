"""Serving latency runner: vLLM's own GDN backends vs ``--attention-backend qla`` (issue 7).

For each backend and server configuration: start ``vllm serve`` on 127.0.0.1 (``server.py``),
wait for health, warm up, drive named workloads with a streaming aiohttp client (token-id
prompts, greedy, ``ignore_eos``), stop the server by PID. Every cell (backend, workload) is saved
to ``<out>/results.json`` as soon as it finishes; a rerun skips the cells already there (resume)
unless ``--fresh``. At the end ``<out>/summary.md`` and PNG plots are written from the JSON.

GDN share: every server runs with ``QLA_VLLM_STEP_TIMING`` (``integrations/vllm/timing.py``):
the plugin's layer times the GDN core on each step that carries prefill tokens — for qla-serve
and for vLLM's own path alike — and the runner assigns those steps to workloads by wall clock.

Backends (``--backends``): ``qla`` = ``--attention-backend qla``; ``auto`` = no GDN flag (vLLM's
default: FlashInfer GDN prefill on sm_90; on vLLM's CPU build its CPU GDN op); ``triton`` =
``--gdn-prefill-backend triton`` (CUDA only: vLLM's CPU op ignores the flag); ``flashinfer``.

Presets (``--preset``): ``h200`` (issue 7: prompts 2K/8K/32K at concurrency 1, a mixed-length
stream at concurrency 4 and 16, a prefix-reuse stream at 16 with prefix caching on), ``h200-quick``
(the same kinds of workload with 2-3 requests per prompt length and 32/24-request streams at 16;
eager by default: fits one short device lease), ``cpu``
(the same shapes shrunk for vLLM's CPU build and the tiny model), ``cpu-smoke`` (smaller still;
the CI test). ``--workloads`` picks a subset by name; ``--list`` prints them.

    bash bench_serving/run_cpu.sh                                  # CPU main job (preset cpu)
    .venv-vllm/bin/python bench_serving/serve.py --preset cpu-smoke --workloads prompt-256-c1,mixed-c4
    python bench_serving/serve.py --preset h200 --model .work/qwen3-next-80b-8l --out ...   # see run_h200.sh
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

BACKENDS = {
    "qla": (["--attention-backend", "qla"], "qla-serve's GDN prefill (--attention-backend qla)"),
    "auto": ([], "vLLM's default GDN prefill (FlashInfer on sm_90; the CPU GDN op on vLLM's CPU build)"),
    "triton": (["--gdn-prefill-backend", "triton"], "vLLM's Triton (FLA) GDN prefill; CUDA only"),
    "flashinfer": (["--gdn-prefill-backend", "flashinfer"], "vLLM's FlashInfer GDN prefill; CUDA only"),
    # qla with intra-card context parallelism off: CP's rule was fitted on kernel time, and CP
    # adds launches and host work per layer, which a host-bound serving step pays in full.
    "qla-nocp": (["--attention-backend", "qla"], "qla-serve with intra-card CP off (QLA_CP=0)"),
    # qla with qla_serve.gdn_conv in place of vLLM's causal conv (one TVM-FFI launch, q/k normalised
    # in it): vLLM's conv wrapper is most of a small step's GDN host time (session 16), while
    # gdn_conv's GPU time is above vLLM's conv + the l2norm pass at 8192 tokens (session 15).
    "qla-conv": (["--attention-backend", "qla"], "qla-serve with its own causal conv (QLA_VLLM_CONV=qla)"),
    # Between servers of one backend the TTFT p50 moves by up to 1.35x (session 17), more than
    # qla-serve can move it; one server taking both paths in turn removes that from the comparison.
    "paired": (["--attention-backend", "qla"], "one qla server whose prefill steps alternate between "
               "qla-serve (`paired:qla`) and vLLM's own path (`paired:auto`, the `auto` kernels) through "
               "the QLA_VLLM_AB_SWITCH file: per request at concurrency 1, per half-stream block (ABBA) above"),
    "paired-triton": (["--attention-backend", "qla"], "`paired` with vLLM's Triton (FLA) prefill kernels on "
                      "vLLM's side (`paired-triton:triton`; QLA_VLLM_FALLBACK_PREFILL=triton)"),
}
BACKEND_ENV = {"qla-nocp": {"QLA_CP": "0"}, "qla-conv": {"QLA_VLLM_CONV": "qla"},   # server environment per backend
               "paired-triton": {"QLA_VLLM_FALLBACK_PREFILL": "triton"}}
# Paired backends → the label of their vLLM side (the side qla-serve's is set against).
PAIRED = {"paired": "auto", "paired-triton": "triton"}
# Cell labels whose prefill ran through qla-serve: traced, never a baseline.
QLA_BACKENDS = {"qla", "qla-nocp", "qla-conv"} | {f"{p}:qla" for p in PAIRED}
ALIASES = {"vllm": "auto"}


def base_of(label: str) -> str:
    """``auto@2`` → ``auto``: ``NAME@K`` is the K-th server of backend NAME (the same settings
    started again), so a run can measure its own server-to-server noise. A paired server's cells
    are ``paired@K:qla`` / ``paired@K:auto`` → ``paired:qla`` / ``paired:auto``."""
    server, _, side = label.partition(":")
    name = server.split("@", 1)[0]
    return f"{name}:{side}" if side else name


def server_of(label: str) -> str:
    """The server backend of a cell label (``paired@2:qla`` → ``paired``)."""
    return label.partition(":")[0].split("@", 1)[0]


def paired_sides(server: str) -> list[str]:
    """A paired server's two sides, qla-serve's first (``["qla", "auto"]``); [] for other servers."""
    kind = server_of(server)
    return ["qla", PAIRED[kind]] if kind in PAIRED else []


def cell_labels(server: str) -> list[str]:
    """The cells one server fills: its own label, or a paired server's two sides."""
    return [f"{server}:{side}" for side in paired_sides(server)] or [server]


def side_path(side: str) -> str:
    """The step-timing path label of a paired side (``integrations/vllm/timing.py``)."""
    return "qla" if side == "qla" else "vllm"


def paired_blocks(w: "Workload", seed: int, vocab: int, vllm_side: str = "auto") -> list[tuple[str, list[list[int]]]]:
    """A paired server's order of work for one workload: blocks of requests, the sides in ABBA order
    so that a linear drift of the server lands on both alike: one request per block at concurrency
    1, four blocks of half the workload's requests for a stream (each block runs at the workload's
    concurrency and drains before the switch flips). Each side gets the workload's full count of
    requests, and the same work: blocks 2m and 2m + 1 hold the same prompt lengths in the same order
    (:meth:`Workload.twin_prompts`), so a mixed stream's random draw of lengths cannot favour one
    side (session 19's mixed-c16 gave qla-serve's side 7 % more prefill tokens than Triton's)."""
    size = 1 if w.concurrency == 1 else max(1, w.num_requests // 2)
    prompts = w.twin_prompts(seed, vocab, size)
    order = ["qla", vllm_side, vllm_side, "qla"]
    blocks = [prompts[i:i + size] for i in range(0, len(prompts), size)]
    return [(order[k % 4], b) for k, b in enumerate(blocks)]


def set_switch(path: Path | None, side: str | None) -> None:
    """Point a paired server at one side: the switch file present = vLLM's own path."""
    if path is None or side is None:
        return
    if side == "qla":
        path.unlink(missing_ok=True)
    else:
        path.touch()


def parse_backends(spec: str) -> list[str]:
    labels = []
    for item in (x.strip() for x in spec.split(",")):
        if not item:
            continue
        name, repeat, k = item.partition("@")
        name = ALIASES.get(name, name)
        if name not in BACKENDS:
            raise ValueError(f"unknown backend {name!r} in --backends; choose from {', '.join(BACKENDS)}")
        if repeat and not (k.isdigit() and int(k) >= 2):
            raise ValueError(f"--backends {item!r}: a repeat is NAME@K with K >= 2 (e.g. auto@2)")
        label = f"{name}@{k}" if repeat else name
        if label in labels:
            raise ValueError(f"--backends names {label!r} twice; a second server of it is {name}@2")
        labels.append(label)
    return labels


METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
PCTS = (50, 90, 99)
TRACE_GLOB = "trace-{}.jsonl"      # .gitignore keeps bench_serving/results/**/trace-*.jsonl out of git


@dataclass
class Workload:
    name: str
    kind: str                      # fixed | mixed | prefix
    concurrency: int
    num_requests: int
    output_len: int
    prompt_lens: list[int]         # fixed: one length; mixed: lengths drawn from; prefix: suffix lengths
    prefix_len: int = 0            # prefix: shared prefix length
    prefix_caching: bool = False   # needs a server with --enable-prefix-caching

    def prompts(self, seed: int, vocab: int) -> list[list[int]]:
        rng = random.Random(seed)
        tok = lambda n: [rng.randrange(3, vocab) for _ in range(n)]  # noqa: E731
        if self.kind == "fixed":
            return [tok(self.prompt_lens[0]) for _ in range(self.num_requests)]
        if self.kind == "mixed":
            return [tok(rng.choice(self.prompt_lens)) for _ in range(self.num_requests)]
        prefix = tok(self.prefix_len)
        return [prefix + tok(rng.choice(self.prompt_lens)) for _ in range(self.num_requests)]

    def twin_prompts(self, seed: int, vocab: int, block: int) -> list[list[int]]:
        """2 × num_requests prompts for a paired server, in blocks of ``block``: :meth:`prompts`'
        blocks, each followed by its twin: the same lengths in the same order, other random tokens
        after any shared prefix (no prefix-cache hit between twins beyond what the workload shares)."""
        one = self.prompts(seed, vocab)
        rng = random.Random(seed + 1)
        twins = [p[:self.prefix_len] + [rng.randrange(3, vocab) for _ in range(len(p) - self.prefix_len)]
                 for p in one]
        return [p for i in range(0, len(one), block) for p in one[i:i + block] + twins[i:i + block]]

    @property
    def max_len(self) -> int:
        return self.prefix_len + max(self.prompt_lens)


def _k(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def fixed(L, n, out):
    return Workload(f"prompt-{_k(L)}-c1", "fixed", 1, n, out, [L])


def mixed(lens, c, n, out):
    return Workload(f"mixed-c{c}", "mixed", c, n, out, list(lens))


def prefix(P, suffixes, c, n, out):
    return Workload(f"prefix-c{c}", "prefix", c, n, out, list(suffixes), P, True)


# Server settings per preset: max_model_len, max_num_batched_tokens, eager, vocab of random ids.
PRESETS = {
    "h200": dict(
        # Four times session 16's request counts: a cell's requests take seconds against a server
        # start of 2-3 minutes, and with 4-8 requests a p50 moved by more than qla-serve moves it.
        workloads=[fixed(2048, 32, 64), fixed(8192, 32, 64), fixed(32768, 16, 64),
                   mixed([256, 512, 1024, 2048, 4096, 8192], 4, 128, 64),
                   mixed([256, 512, 1024, 2048, 4096, 8192], 16, 256, 64),
                   prefix(8192, [128, 256, 512, 1024], 16, 192, 64)],
        max_model_len=33792, max_num_batched_tokens=8192, eager=False, vocab=2048,
        model=ROOT / ".work" / "qwen3-next-80b-8l-e512"),
    # Issue 7's workloads at the fewest requests that still give p50s, for one short device lease:
    # 2K/8K/32K at concurrency 1, the mixed-length stream at 16, the prefix-reuse stream at 16.
    # Eager by default (each CUDA-graph server start adds torch.compile + capture time; pass
    # --no-eager for graphs); run with --one-server (run_h200.sh does) so each backend starts once.
    "h200-quick": dict(
        workloads=[fixed(2048, 3, 64), fixed(8192, 3, 64), fixed(32768, 2, 64),
                   mixed([256, 512, 1024, 2048, 4096, 8192], 16, 32, 64),
                   prefix(8192, [128, 256, 512, 1024], 16, 24, 64)],
        max_model_len=33792, max_num_batched_tokens=8192, eager=True, vocab=2048,
        model=ROOT / ".work" / "qwen3-next-80b-8l-e512"),
    "cpu": dict(
        workloads=[fixed(512, 3, 16), fixed(2048, 3, 16),
                   mixed([64, 128, 256, 512, 1024], 4, 8, 16),
                   prefix(1024, [32, 64, 128], 4, 6, 16)],
        max_model_len=4096, max_num_batched_tokens=512, eager=True, vocab=2048,
        model=ROOT / ".work" / "tiny-qwen3-next"),
    "cpu-smoke": dict(
        workloads=[fixed(256, 2, 6), mixed([32, 96, 200], 3, 3, 6), prefix(256, [16, 48], 2, 3, 6)],
        max_model_len=2048, max_num_batched_tokens=128, eager=True, vocab=2048,
        model=ROOT / ".work" / "tiny-qwen3-next"),
}


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


# ----------------------------------------------------------------------------------------------
# Client
# ----------------------------------------------------------------------------------------------
async def _one(session, url: str, model: str, ids: list[int], output_len: int) -> RequestResult:
    # Token counts come from the server's usage record: one streamed chunk can carry several
    # tokens (the detokenizer holds back incomplete UTF-8), so counting chunks undercounts.
    body = {"model": model, "prompt": ids, "max_tokens": output_len, "temperature": 0.0,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    ttft = None
    last = t0
    itl: list[float] = []
    n = 0           # chunks with text
    usage = None    # completion_tokens from the final usage chunk
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
                if chunk.get("usage"):
                    usage = chunk["usage"].get("completion_tokens")
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
    tokens = usage if usage is not None else n
    if tokens < output_len:
        return RequestResult(len(ids), tokens, 0.0, 0.0,
                             error=f"stream ended after {tokens}/{output_len} tokens ({n} chunks)")
    return RequestResult(len(ids), tokens, (ttft or e2e) * 1e3, e2e * 1e3, itl)


def warm_up(srv, workloads, seed: int, vocab: int) -> None:
    """Before timing: every prompt length alone, then a rehearsal of each workload: fresh prompts
    of its own kind and length mix, 2 × its concurrency of them (at least 2; a stream: at least a
    timed block, half its requests), at its concurrency
    and its full output length (a prefix workload's rehearsal reuses a prefix cached just before,
    as in its timed window). Engines build kernels lazily per shape class (FlashInfer JITs its
    multi-sequence prefill, qla-serve loads its wide-V-block and CP kernels on the first batch
    that needs them, Triton compiles vLLM's MoE and cache kernels for new batch sizes, into a disk
    cache that the next server on the machine then finds warm); a workload must not pay that
    inside its timed window. With one short batch per workload (4 output tokens), session 16's
    first server had a ~1-s stall inside its mixed-c4 window (cause not found; a compile for a
    batch size first seen there is the likeliest). With 2 × concurrency requests, session 20's
    paired servers still had whole concurrency groups stall ~0.8 s at once in a stream's first timed
    block (3–9 requests at over twice the median TTFT there, 0–1 in later blocks; the gap fell
    between two GDN layers, outside the GDN core), and the first block is always qla-serve's side in
    a paired server: a stream now rehearses a whole block (half its requests)."""
    rng = random.Random(seed)
    tok = lambda n: [rng.randrange(3, vocab) for _ in range(n)]  # noqa: E731
    lens = sorted({L for w in workloads for L in ([w.max_len] if w.kind != "mixed" else w.prompt_lens)})
    asyncio.run(drive(srv.url, srv.served_name, [tok(L) for L in lens], 1, 4))
    for w in workloads:
        n = min(max(2 * w.concurrency, 2), w.num_requests)
        if w.concurrency > 1:
            n = max(n, w.num_requests // 2)
        if w.kind == "prefix":
            # As timed: a cached prefix (its own, fresh), then suffixes that reuse it, so the
            # prefill-from-a-restored-state shape is built here (FlashInfer JITs it: one 6.7 s step
            # inside auto's timed prefix window on the H200 before this).
            shared = tok(w.prefix_len)
            asyncio.run(drive(srv.url, srv.served_name, [shared], 1, 2))
            batch = [shared + tok(rng.choice(w.prompt_lens)) for _ in range(n)]
        else:
            batch = [tok(w.prefix_len + rng.choice(w.prompt_lens)) for _ in range(n)]
        asyncio.run(drive(srv.url, srv.served_name, batch, w.concurrency, w.output_len))


async def drive(url: str, model: str, prompts: list[list[int]], concurrency: int, output_len: int,
                progress=None) -> list[RequestResult]:
    import aiohttp

    sem = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3600)) as session:
        async def limited(ids):
            async with sem:
                res = await _one(session, url, model, ids, output_len)
                if progress is not None:
                    progress.update(1)
                return res

        return await asyncio.gather(*(limited(p) for p in prompts))


# ----------------------------------------------------------------------------------------------
# Statistics
# ----------------------------------------------------------------------------------------------
def percentile(xs: list[float], p: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def median_ci(xs: list[float], z: float = 1.96) -> list[float] | None:
    """A distribution-free ~95 % confidence interval of the median: the order statistics at ranks
    ⌊n/2 − z·√n/2⌋ and ⌈1 + n/2 + z·√n/2⌉ (1-based; the binomial's normal approximation). None
    below 6 samples."""
    import math

    n = len(xs)
    if n < 6:
        return None
    xs = sorted(xs)
    half = z * math.sqrt(n) / 2
    lo, hi = max(math.floor(n / 2 - half) - 1, 0), min(math.ceil(n / 2 + half), n - 1)
    return [xs[lo], xs[hi]]


def summarize(results: list[RequestResult]) -> dict:
    ok = [r for r in results if r.error is None]
    series = {
        "ttft_ms": [r.ttft_ms for r in ok],
        "tpot_ms": [r.tpot_ms for r in ok if r.tpot_ms is not None],
        "itl_ms": [x for r in ok for x in r.itl_ms],
        "e2e_ms": [r.e2e_ms for r in ok],
    }
    out = {"requests": len(results), "failed": len(results) - len(ok),
           "errors": sorted({r.error for r in results if r.error})[:5],
           "prompt_tokens": sum(r.prompt_len for r in results)}
    for m, xs in series.items():
        out[m] = {f"p{p}": percentile(xs, p) for p in PCTS}
        out[m]["mean"] = statistics.fmean(xs) if xs else None
        out[m]["p50_ci"] = median_ci(xs)
    # Per-request TTFT and TPOT, so servers of one backend can be pooled (``pooled``): between
    # servers the p50 moves by more than inside one (session 17: 1.02-1.35x), so a verdict
    # wants several servers per backend. ITL (tokens x requests) is left out: too long.
    out["samples"] = {m: [round(x, 3) for x in series[m]] for m in ("ttft_ms", "tpot_ms")}
    return out


def prefix_counters(srv) -> dict | None:
    """vLLM's prefix-cache counters (tokens queried / hit), or None where /metrics lacks them."""
    try:
        return {"queries": srv.metric_sum("vllm:prefix_cache_queries_total"),
                "hits": srv.metric_sum("vllm:prefix_cache_hits_total")}
    except Exception:
        return None


def keep_previous(path: Path) -> None:
    """Move a trace that an earlier start of the same server tag wrote in a resumed run (another
    device call) to ``<stem>.<k>.jsonl`` so the new start writes its own, and the earlier cells'
    steps stay readable (session 22 lost a server's mixed-c4 steps to the next start's unlink).
    A ``--fresh`` run deletes them instead: they belong to discarded results."""
    if not path.exists():
        return
    k = 1
    while (kept := path.with_name(f"{path.stem}.{k}{path.suffix}")).exists():
        k += 1
    path.rename(kept)


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _mean_of(recs: list[dict], key: str) -> float | None:
    vals = [r[key] for r in recs if r.get(key) is not None]
    return statistics.fmean(vals) if vals else None


def _layer_split(recs: list[dict], part: int, key: str = "layer_ms") -> list[dict]:
    """Per step, the first GDN layer's figure (part 0) or the mean of the other layers' (part 1)
    from the per-layer list ``key``; steps traced before that list existed give nothing."""
    out = []
    for r in recs:
        lm = r.get(key) or []
        if len(lm) >= 2:
            out.append({"x": lm[0] if part == 0 else statistics.fmean(lm[1:])})
    return out


def gdn_share(steps: list[dict], windows: list[tuple[float, float]], ttft_sum_ms: float | None,
              path: str | None = None) -> dict:
    """GDN figures of the prefill steps that began inside one of ``windows`` ([t0, t1] wall-clock
    pairs; a paired side has several) and, given ``path``, ran that path (``qla`` / ``vllm``);
    one value per worker, averaged."""
    per_pid: dict[int, list[dict]] = {}
    for s in steps:
        if any(t0 <= s["t"] <= t1 for t0, t1 in windows) and (path is None or s.get("backend") == path):
            per_pid.setdefault(s["pid"], []).append(s)
    wall_ms = sum(t1 - t0 for t0, t1 in windows) * 1e3
    if not per_pid:
        return {"steps": 0}
    rows = []
    for recs in per_pid.values():
        gdn = sum(r["gdn_ms"] for r in recs)
        step = sum(r["step_ms"] for r in recs)
        rows.append({"steps": len(recs), "gdn_ms_total": gdn, "gdn_ms_per_step": gdn / len(recs),
                     "step_ms_per_step": step / len(recs), "share_of_step": gdn / step if step else None,
                     "share_of_wall": gdn / wall_ms,
                     "share_of_ttft": gdn / ttft_sum_ms if ttft_sum_ms else None,
                     "prefill_tokens": sum(r["prefill_tokens"] for r in recs),
                     # host ms of qla-serve's metadata builder per prefill step (qla servers only)
                     "qla_builder_ms_per_step": _mean_of(recs, "qla_builder_ms"),
                     "builder_ms_per_step": _mean_of(recs, "builder_ms"),
                     # host ms the GDN cores took to enqueue per step (close to gdn_ms: launch-bound)
                     "gdn_host_ms_per_step": _mean_of(recs, "host_ms"),
                     # the step's first GDN layer against the mean of the others: where the first
                     # reads much more, its GPU waited for the host (nothing was queued ahead of it)
                     "first_layer_ms_per_step": _mean_of(_layer_split(recs, 0), "x"),
                     "other_layers_ms_per_step": _mean_of(_layer_split(recs, 1), "x"),
                     # the first layer's host ms and the thread's own CPU ms in it: host well above
                     # CPU is time the forward thread waited (the GIL, the OS)
                     "first_layer_host_ms": _mean_of(_layer_split(recs, 0, "layer_host_ms"), "x"),
                     "first_layer_cpu_ms": _mean_of(_layer_split(recs, 0, "layer_cpu_ms"), "x"),
                     "backend_path": sorted({r["backend"] for r in recs})})
    out = {"workers": len(rows)}
    for k in rows[0]:
        vals = [r[k] for r in rows]
        out[k] = vals[0] if k == "backend_path" else (
            None if any(v is None for v in vals) else statistics.fmean(vals))
    out["steps"] = int(out["steps"])
    return out


# ----------------------------------------------------------------------------------------------
# Report: markdown + plots, always rebuilt from the JSON
# ----------------------------------------------------------------------------------------------
def fmt(x, spec=".1f") -> str:
    return "-" if x is None else format(x, spec)


def cells(report: dict):
    for b, per in report["cells"].items():
        for w, s in per.items():
            yield b, w, s


def prefix_hits(s: dict) -> str:
    pc = s.get("prefix_cache")
    if not pc or not pc.get("queries"):
        return "-"
    return f"{pc['hits']:.0f} / {pc['queries']:.0f}"


def markdown(report: dict) -> str:
    cfg = report["config"]
    head = "| backend | workload | reqs | fail | " + " | ".join(
        f"{m.split('_')[0].upper()} p{p}" for m in METRICS for p in PCTS) + " |"
    lat = [head, "|" + "---|" * (4 + len(METRICS) * len(PCTS))]
    gdn = ["| backend | workload | prefill steps | GDN prefill ms/step | its host ms/step | first layer / other layers ms | "
           "first layer host / thread CPU ms | step ms | GDN share of step | GDN share of TTFT (c=1) | "
           "GDN share of wall | qla-serve calls | qla-serve builder ms/step | prefix-cache hit tokens |",
           "|" + "---|" * 14]
    for b, w, s in cells(report):
        lat.append(f"| {b} | {w} | {s['requests']} | {s['failed']} | " + " | ".join(
            fmt(s[m][f"p{p}"]) for m in METRICS for p in PCTS) + " |")
        g = s.get("gdn") or {}
        pct = lambda x: fmt(None if x is None else 100 * x, ".1f") + ("%" if x is not None else "")  # noqa: E731
        gdn.append(f"| {b} | {w} | {g.get('steps', 0)} | {fmt(g.get('gdn_ms_per_step'), '.2f')} | "
                   f"{fmt(g.get('gdn_host_ms_per_step'), '.2f')} | "
                   f"{fmt(g.get('first_layer_ms_per_step'), '.2f')} / {fmt(g.get('other_layers_ms_per_step'), '.2f')} | "
                   f"{fmt(g.get('first_layer_host_ms'), '.2f')} / {fmt(g.get('first_layer_cpu_ms'), '.2f')} | "
                   f"{fmt(g.get('step_ms_per_step'), '.1f')} | {pct(g.get('share_of_step'))} | "
                   f"{pct(g.get('share_of_ttft'))} | {pct(g.get('share_of_wall'))} | "
                   f"{s.get('qla_calls', '-') if base_of(b) in QLA_BACKENDS else '-'} | "
                   f"{fmt(g.get('qla_builder_ms_per_step'), '.2f')} | {prefix_hits(s)} |")
    # qla vs the best baseline, TTFT p50 / TPOT p50 (issue 7 targets)
    cmp = []
    base = [b for b in report["cells"] if base_of(b) not in QLA_BACKENDS]
    mine = [b for b in report["cells"] if base_of(b) in QLA_BACKENDS]
    if mine and base:
        cmp = ["| workload | qla-serve server | its TTFT p50 [95 % CI] | best baseline TTFT p50 [95 % CI] | ratio | "
               "its TPOT p50 [95 % CI] | baseline TPOT p50 [95 % CI] | GDN ms/step it / best baseline |",
               "|" + "---|" * 8]
        for w in report["workloads"]:
            for q_label in mine:
                s = report["cells"][q_label].get(w["name"])
                bs = [(report["cells"][b][w["name"]], b) for b in base if w["name"] in report["cells"][b]]
                if s is None or not bs:
                    continue
                best, bn = min(bs, key=lambda x: x[0]["ttft_ms"]["p50"] or float("inf"))
                q, r = s["ttft_ms"]["p50"], best["ttft_ms"]["p50"]
                gq, gr = (s.get("gdn") or {}).get("gdn_ms_per_step"), (best.get("gdn") or {}).get("gdn_ms_per_step")
                cmp.append(f"| {w['name']} | {q_label} | {fmt(q)}{ci(s['ttft_ms'])} | {fmt(r)}{ci(best['ttft_ms'])} "
                           f"({bn}) | {fmt(q / r if q and r else None, '.2f')} | {fmt(s['tpot_ms']['p50'])}"
                           f"{ci(s['tpot_ms'])} | {fmt(best['tpot_ms']['p50'])}{ci(best['tpot_ms'])} | "
                           f"{fmt(gq, '.2f')} / {fmt(gr, '.2f')} |")
    wl = "\n".join(f"- `{w['name']}`: {w['kind']}, concurrency {w['concurrency']}, {w['num_requests']} requests, "
                   f"prompt lengths {w['prompt_lens']}" + (f" after a shared {w['prefix_len']}-token prefix "
                   "(prefix caching on; the prefix is sent once before the stream)" if w["kind"] == "prefix" else "") + f", {w['output_len']} output tokens"
                   for w in report["workloads"])
    bk = "\n".join(f"- `{b}`: {BACKENDS[server_of(b)][1]}; `{' '.join(BACKENDS[server_of(b)][0]) or '(no flag)'}`"
                   + (" (a second server of it, started again: the noise floor)" if b != base_of(b) else "")
                   for b in report["cells"])
    noise = noise_floor(report)
    failed = sum(s["failed"] for _, _, s in cells(report))
    merged = "".join(f"\n- {m['results']}" + (" (servers renamed: " + ", ".join(f"{a} → {b}" for a, b in m["renamed"].items())
                                                + ")" if m["renamed"] else "") for m in report.get("merged_from", []))
    if merged:
        merged = ("\nMerged (`serve.py --merge`) from these runs' results.json (the host and settings above are "
                  "the first run's):" + merged + "\n")
    return f"""# Serving latency, preset `{cfg['preset']}` ({report['updated']})

Model `{cfg['model']}`; vllm serve `{' '.join(cfg['common_args'])}`; prefix caching
{cfg.get('prefix_caching', 'on for prefix workloads only')}; greedy, `ignore_eos`, one server at a time. Host: {report['host']['node']},
{report['host']['cpu_count']} CPUs{', ' + report['host']['gpu'] if report['host'].get('gpu') else ''};
load average per cell in results.json (on a shared host other processes skew these figures).
Failed requests: {failed}.
{merged}
Backends:
{bk}

Workloads:
{wl}

## Latency (ms)

{chr(10).join(lat)}

## GDN prefill share

The plugin's layer times the GDN core (causal conv + gating prep + chunked recurrence, all GDN
layers of a step) on every engine step that carries prefill tokens, for every backend
(`QLA_VLLM_STEP_TIMING`; CUDA events on GPU, perf_counter on CPU). "its host ms" is the host time
the same cores took to enqueue their work: where it comes close to the GDN ms, the GPU waited for
the host and the step is launch-bound. "first layer / other layers" splits it per layer: the
step's first GDN layer against the mean of the others (a first layer that reads its host time
found no GPU work queued ahead of it). "step ms" is the interval
between consecutive steps (forward + scheduling; with full CUDA graphs decode-only steps are not
seen, so it can be an overestimate). "share of TTFT" = GDN time of the window's prefill steps /
summed TTFT, for concurrency-1 workloads; "share of wall" = GDN time / the workload's wall time.
"qla-serve builder" = host time the plugin's metadata builder adds per prefill step (plan, conv
tables, dense indices), outside the GDN core's time.

{chr(10).join(gdn)}

{"## qla vs the best baseline" + chr(10) + chr(10) + chr(10).join(cmp) if cmp else ""}
{paired_table(report)}{noise}{pooled(report)}"""


def interval(got: list[float] | None) -> str:
    """A p50 confidence interval as " [lo, hi]" ("" where there is none: under 6 samples, or a cell
    recorded before intervals were kept)."""
    return f" [{fmt(got[0])}, {fmt(got[1])}]" if got else ""


def ci(m: dict) -> str:
    return interval(m.get("p50_ci"))


def servers_by_backend(report: dict) -> dict[str, list[str]]:
    """Each backend's server labels (``NAME``, ``NAME@2``, …) in the report."""
    groups: dict[str, list[str]] = {}
    for b in report["cells"]:
        groups.setdefault(base_of(b), []).append(b)
    return groups


def pooled(report: dict) -> str:
    """Where a backend ran on more than one server (``NAME@K``): per workload, the p50 and its
    interval over all its servers' requests together, and qla's pooled p50 against the best
    pooled baseline. Cells recorded before per-request samples were kept give nothing."""
    groups = servers_by_backend(report)
    if not any(len(v) > 1 for v in groups.values()):
        return ""
    rows = []
    for w in report["workloads"]:
        stats = {}
        for name, labels in groups.items():
            got = [report["cells"][b][w["name"]].get("samples") for b in labels if w["name"] in report["cells"][b]]
            if not got or any(g is None for g in got):
                continue
            stats[name] = {m: sum((g[m] for g in got), []) for m in ("ttft_ms", "tpot_ms")} | {"servers": len(got)}
        base = {n: st for n, st in stats.items() if n not in QLA_BACKENDS}
        if not base:
            continue
        best = min(base, key=lambda n: percentile(base[n]["ttft_ms"], 50) or float("inf"))
        for name, st in stats.items():
            med = {m: percentile(st[m], 50) for m in ("ttft_ms", "tpot_ms")}
            ratio = "-"
            if name in QLA_BACKENDS and med["ttft_ms"]:
                ratio = fmt(med["ttft_ms"] / percentile(base[best]["ttft_ms"], 50), ".2f") + f" ({best})"
            rows.append(f"| {w['name']} | {name} | {st['servers']} | {fmt(med['ttft_ms'])}{interval(median_ci(st['ttft_ms']))} | "
                        f"{fmt(med['tpot_ms'])}{interval(median_ci(st['tpot_ms']))} | {ratio} |")
    if not rows:
        return ""
    return ("\n## Pooled over servers\n\nEvery request of a backend's servers together (the servers are taken as "
            "exchangeable).\n\n| workload | backend | servers | TTFT p50 [95 % CI] | TPOT p50 [95 % CI] | "
            "qla TTFT p50 / best baseline's |\n|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")


def blocks_of(xs: list[float], size: int, breaks: tuple[int, ...] = ()) -> list[list[float]]:
    """``xs`` cut into runs of ``size`` consecutive samples (the last run of a segment may be
    shorter); ``breaks``: indices where another server's samples start, which no run crosses."""
    out = []
    for lo, hi in zip((0, *breaks), (*breaks, len(xs))):
        out += [xs[i:min(i + size, hi)] for i in range(lo, hi, size)]
    return out


def ratio_ci(a: list[float], b: list[float], reps: int = 2000, seed: int = 0, block: int = 1,
             paired: bool = False, breaks: tuple[int, ...] = ()) -> list[float] | None:
    """95 % percentile-bootstrap interval of median(a) / median(b) (deterministic: a fixed seed).

    The samples are drawn in blocks of ``block`` consecutive requests (in the order they were sent):
    a closed-loop stream at concurrency c runs its requests in waves of about c that start together
    and share every decode step, so their TPOTs (and TTFTs) move together; resampling single requests
    treats them as independent and gives intervals too narrow by about √c (session 23: mixed-c4's
    TPOT interval against vLLM's default widened from [1.001, 1.056] to [0.987, 1.078]).
    ``paired``: a and b are twins (request i of each has the same prompt length; ``paired_blocks``)
    and every draw takes the same blocks from both. ``breaks``: where another server's samples start
    (pooled cells). Requests that failed are not in the samples, so where a side lost some its
    blocks no longer line up with its twin's: the draw is then unpaired (block lengths differ).
    None below 6 samples or 2 blocks on either side."""
    if len(a) < 6 or len(b) < 6:
        return None
    ba, bb = blocks_of(a, block, breaks), blocks_of(b, block, breaks)
    if len(ba) < 2 or len(bb) < 2:
        return None
    paired = paired and [len(x) for x in ba] == [len(x) for x in bb]
    rng = random.Random(seed)
    ratios = []
    for _ in range(reps):
        pick = [rng.randrange(len(ba)) for _ in ba]
        xa = [x for i in pick for x in ba[i]]
        xb = [x for i in (pick if paired else (rng.randrange(len(bb)) for _ in bb)) for x in bb[i]]
        ratios.append(statistics.median(xa) / statistics.median(xb))
    ratios.sort()
    return [ratios[int(0.025 * reps)], ratios[int(0.975 * reps) - 1]]


def paired_pairs(report: dict) -> list[tuple[str, str, dict, dict, float, list[float] | None, dict]]:
    """(workload, server, qla-serve side's cell, vLLM side's cell, TTFT p50 ratio, its bootstrap
    interval, the interval's resampling: ``ratio_ci``'s block/paired/breaks) of every paired server
    that holds per-request samples, and per workload and paired backend with several such servers an
    ``all N <backend>`` entry whose cells hold every request of them (samples only). Blocks are the
    workload's concurrency (its waves); the two sides of a server are twins (``paired_blocks``)."""
    out = []
    for w in report["workloads"]:
        block = max(1, int(w.get("concurrency", 1)))
        for kind, other in PAIRED.items():
            servers = sorted({c.partition(":")[0] for c in report["cells"] if base_of(c) == f"{kind}:qla"})
            pairs = [(srv, report["cells"].get(f"{srv}:qla", {}).get(w["name"]),
                      report["cells"].get(f"{srv}:{other}", {}).get(w["name"])) for srv in servers]
            pairs = [(*p, ()) for p in pairs if p[1] and p[2] and p[1].get("samples") and p[2].get("samples")]
            if len(pairs) > 1:
                pool = lambda k, m: [x for p in pairs for x in p[k]["samples"][m]]  # noqa: E731
                # Where each server's samples start in the pooled list (the sides' counts agree per
                # server when they are twins; the qla side's decide).
                sizes = [len(p[1]["samples"]["ttft_ms"]) for p in pairs]
                breaks = tuple(sum(sizes[:i]) for i in range(1, len(sizes)))
                pairs.append((f"all {len(pairs)} {kind}", *({"samples": {m: pool(k, m) for m in ("ttft_ms", "tpot_ms")}}
                                                            for k in (1, 2)), breaks))
            for srv, q, a, breaks in pairs:
                qs, as_ = q["samples"]["ttft_ms"], a["samples"]["ttft_ms"]
                how = {"block": block, "paired": True, "breaks": breaks}
                out.append((w["name"], srv, q, a, percentile(qs, 50) / percentile(as_, 50), ratio_ci(qs, as_, **how), how))
    return out


def paired_table(report: dict) -> str:
    """Paired servers: per workload, qla-serve's side against vLLM's path in the same server (the
    TTFT and TPOT p50 ratios with their bootstrap intervals), each server and, with several, all
    pooled."""
    med = lambda c, m: percentile(c["samples"][m], 50)  # noqa: E731
    with_ci = lambda x, r: fmt(x, ".3f") + (f" [{r[0]:.3f}, {r[1]:.3f}]" if r else "")  # noqa: E731
    rows = []
    for wname, srv, q, a, ratio, r, how in paired_pairs(report):
        gq, ga = ((c.get("gdn") or {}).get("gdn_ms_per_step") for c in (q, a))
        tq, ta = q["samples"]["tpot_ms"], a["samples"]["tpot_ms"]
        tpot = "-"
        if tq and ta and med(a, "tpot_ms"):
            tpot = with_ci(med(q, "tpot_ms") / med(a, "tpot_ms"), ratio_ci(tq, ta, **how))
        rows.append(f"| {wname} | {srv} | {fmt(med(q, 'ttft_ms'))}{interval(median_ci(q['samples']['ttft_ms']))} | "
                    f"{fmt(med(a, 'ttft_ms'))}{interval(median_ci(a['samples']['ttft_ms']))} | "
                    f"{with_ci(ratio, r)} | {fmt(med(q, 'tpot_ms'))} | {fmt(med(a, 'tpot_ms'))} | "
                    f"{tpot} | "
                    f"{fmt(gq, '.2f')} / {fmt(ga, '.2f')} |")
    if not rows:
        return ""
    return ("\n## Paired: qla-serve and vLLM's path in one server\n\nThe server's prefill steps alternate "
            "between the two paths (ABBA; per request at concurrency 1, half-stream blocks above); vLLM's side "
            "runs its default kernels in `paired` servers (as `auto`), its Triton kernels in `paired-triton` "
            "ones (as `triton`). Each side gets its own prompts, with the other side's lengths in the same order "
            "(twin blocks); a ratio's interval is a 95 % bootstrap of the ratio of medians that draws the same "
            "runs of as many consecutive requests as the workload's concurrency from both sides (a stream's waves "
            "share their decode steps: single requests are not independent). "
            "Stream blocks drain between switches, so their figures are not those of one continuous stream.\n\n"
            "| workload | server | qla TTFT p50 [95 % CI] | vLLM path TTFT p50 [95 % CI] | ratio [95 % CI] | "
            "qla TPOT p50 | vLLM path TPOT p50 | TPOT ratio [95 % CI] | GDN ms/step qla / vLLM |\n"
            "|---|---|---|---|---|---|---|---|---|\n"
            + "\n".join(rows) + "\n")


def noise_floor(report: dict) -> str:
    """Backends started more than once (``NAME@K``): per workload, how far apart the same settings
    land. A qla-vs-baseline ratio inside this spread is not a difference."""
    rows = []
    for name, labels in servers_by_backend(report).items():
        if len(labels) < 2:
            continue
        for w in report["workloads"]:
            got = [(b, report["cells"][b][w["name"]]) for b in labels if w["name"] in report["cells"][b]]
            if len(got) < 2:
                continue
            ttft = [s["ttft_ms"]["p50"] for _, s in got]
            tpot = [s["tpot_ms"]["p50"] for _, s in got]
            spread = lambda xs: fmt(max(xs) / min(xs) if all(xs) else None, ".2f")  # noqa: E731
            rows.append(f"| {name} | {w['name']} | {' / '.join(fmt(x) for x in ttft)} | {spread(ttft)} | "
                        f"{' / '.join(fmt(x) for x in tpot)} | {spread(tpot)} |")
    if not rows:
        return ""
    return ("\n## Same settings, another server (noise floor)\n\n"
            "| backend | workload | TTFT p50 per server | max / min | TPOT p50 per server | max / min |\n"
            "|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")


def plots(report: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wl = {w["name"]: w for w in report["workloads"]}
    styles = {50: "-", 90: "--", 99: ":"}
    colors = {"qla": "tab:red", "auto": "tab:blue", "triton": "tab:green", "flashinfer": "tab:orange",
              "qla-nocp": "tab:purple", "qla-conv": "tab:brown", "paired:qla": "tab:pink", "paired:auto": "tab:cyan",
              "paired-triton:qla": "tab:olive", "paired-triton:triton": "tab:gray"}
    written = []

    def figure(title, xlabel, pick, fname, logx):
        fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
        any_pts = False
        for ax, m in zip(axes, METRICS):
            for b, per in report["cells"].items():
                series: dict[str, list] = {}
                for w, s in per.items():
                    got = pick(wl[w]) if w in wl else None
                    if got is not None:
                        series.setdefault(got[0], []).append((got[1], s))
                for label, pts in series.items():
                    pts.sort(key=lambda t: t[0])
                    any_pts = True
                    for p in PCTS:
                        ys = [s[m][f"p{p}"] for _, s in pts]
                        ax.plot([x for x, _ in pts], [float("nan") if y is None else y for y in ys], styles[p],
                                marker="o" if label == "mixed" else "s", ms=3, color=colors.get(base_of(b)),
                                label=f"{b}{' ' + label if label else ''} p{p}")
            ax.set_title(m.replace("_ms", "").upper() + " (ms)")
            ax.set_xlabel(xlabel)
            if logx:
                ax.set_xscale("log", base=2)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=7)
        fig.suptitle(title)
        fig.tight_layout()
        if any_pts:
            fig.savefig(out / fname, dpi=110)
            written.append(out / fname)
        plt.close(fig)

    figure("Latency vs prompt length (concurrency 1)", "prompt tokens",
           lambda w: ("", w["prompt_lens"][0]) if w["kind"] == "fixed" and w["concurrency"] == 1 else None,
           "latency_vs_prompt_len.png", True)
    figure("Latency vs concurrency (mixed-length and prefix-reuse streams)", "concurrency",
           lambda w: (w["kind"], w["concurrency"]) if w["kind"] in ("mixed", "prefix") else None,
           "latency_vs_concurrency.png", False)

    # GDN prefill ms per step and share of step time, per workload and backend
    names = [w["name"] for w in report["workloads"] if any(w["name"] in per for per in report["cells"].values())]
    if names:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(14, 4.2))
        bs = list(report["cells"])
        width = 0.8 / max(len(bs), 1)
        for i, b in enumerate(bs):
            g = [(report["cells"][b].get(n) or {}).get("gdn") or {} for n in names]
            xs = [j + i * width for j in range(len(names))]
            a1.bar(xs, [x.get("gdn_ms_per_step") or 0 for x in g], width, label=b, color=colors.get(base_of(b)))
            a2.bar(xs, [100 * (x.get("share_of_step") or 0) for x in g], width, label=b, color=colors.get(base_of(b)))
        for ax, t in ((a1, "GDN prefill ms per step"), (a2, "GDN share of step time (%)")):
            ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))], names, rotation=20, fontsize=8)
            ax.set_title(t)
            ax.grid(alpha=0.3, axis="y")
        a1.legend()
        fig.tight_layout()
        fig.savefig(out / "gdn_share.png", dpi=110)
        written.append(out / "gdn_share.png")
        plt.close(fig)

    # Paired servers: the TTFT p50 ratio (qla-serve / vLLM's path) per workload with its interval
    pairs = paired_pairs(report)
    if pairs:
        series = lambda sv: "pooled " + sv.split()[-1] if sv.startswith("all ") else sv  # noqa: E731
        names = list(dict.fromkeys(p[0] for p in pairs))
        servers = list(dict.fromkeys(series(p[1]) for p in pairs))
        fig, ax = plt.subplots(figsize=(10, 4.2))
        for i, srv in enumerate(servers):
            pts = [(names.index(wn), r, ci_) for wn, sv, _, _, r, ci_, _ in pairs if series(sv) == srv]
            xs, ys, lo, hi = [], [], [], []
            for j, r, ci_ in pts:
                ci_ = ci_ or [r, r]
                xs.append(j + (i - (len(servers) - 1) / 2) * 0.12)
                ys.append(r)
                lo.append(r - ci_[0])
                hi.append(ci_[1] - r)
            pooled_ = srv.startswith("pooled")
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt="D" if pooled_ else "o", ms=7 if pooled_ else 4, capsize=3,
                        color=("black" if srv == "pooled paired" else "dimgray") if pooled_ else None, label=srv)
        ax.axhline(1.0, color="grey", lw=1)
        ax.set_xticks(range(len(names)), names, rotation=15, fontsize=8)
        ax.set_ylabel("TTFT p50, qla-serve / vLLM's path")
        ax.set_title("Paired servers: qla-serve against vLLM's own path in the same server (95 % bootstrap intervals)")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "paired_ttft_ratio.png", dpi=110)
        written.append(out / "paired_ttft_ratio.png")
        plt.close(fig)
    return written


def _flush_steps(srv) -> None:
    """Step-timing lines are written when the next step starts: two 1-token requests flush the last ones."""
    for _ in range(2):
        asyncio.run(drive(srv.url, srv.served_name, [[5]], 1, 2))
    time.sleep(0.5)


def write_report(report: dict, out: Path, with_plots: bool = True) -> list[Path]:
    report["updated"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (out / "results.json").write_text(json.dumps(report, indent=1))
    (out / "summary.md").write_text(markdown(report))
    return plots(report, out) if with_plots else []


def merge_reports(reports: list[dict], sources: list[str]) -> dict:
    """One report from several runs of the same preset and model (e.g. servers started in different
    sessions), so their servers pool. A server whose label is taken already becomes the backend's
    next free ``NAME@K`` (both sides of a paired server together). Workloads must agree."""
    first = reports[0]
    out = {k: v for k, v in first.items() if k != "cells"} | {"cells": {}, "merged_from": [],
                                                              "workloads": list(first["workloads"])}
    for rep, src in zip(reports, sources):
        if rep["config"].get("model") != first["config"].get("model"):
            raise ValueError(f"--merge: {src} is model {rep['config'].get('model')!r}, "
                             f"{sources[0]} {first['config'].get('model')!r}")
        known = {w["name"]: w for w in out["workloads"]}
        for w in rep["workloads"]:
            if w["name"] not in known:
                out["workloads"].append(w)
            elif known[w["name"]] != w:
                raise ValueError(f"--merge: workload {w['name']} differs between {src} and the runs before it")
        renamed = {}
        for server in dict.fromkeys(c.partition(":")[0] for c in rep["cells"]):
            name, k = server.split("@", 1)[0], 1
            label = server
            while any(c.partition(":")[0] == label for c in out["cells"]):
                k += 1
                label = f"{name}@{k}"
            for cell, new in zip(cell_labels(server), cell_labels(label)):
                if cell in rep["cells"]:
                    out["cells"][new] = rep["cells"][cell]
            if label != server:
                renamed[server] = label
        out["merged_from"].append({"results": src, "renamed": renamed})
    return out


# ----------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------
def gpu_name() -> str | None:
    try:
        import subprocess

        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=20).stdout.strip().replace("\n", ", ") or None
    except Exception:
        return None


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="cpu")
    ap.add_argument("--workloads", default="", help="comma list of workload names of the preset (default: all)")
    ap.add_argument("--list", action="store_true", help="print the preset's workloads and exit")
    ap.add_argument("--backends", default="", help=f"comma list of {', '.join(BACKENDS)} "
                    "(default: qla,auto on CPU presets; qla,auto,triton on h200); NAME@2 starts a second "
                    "server of NAME with the same settings (its spread is the run's noise floor)")
    ap.add_argument("--model", type=Path, default=None, help="model folder (CPU presets build the tiny one)")
    ap.add_argument("--out", type=Path, default=None, help="default bench_serving/results/<preset>")
    ap.add_argument("--fresh", action="store_true", help="discard results.json instead of resuming")
    ap.add_argument("--num-requests", type=int, default=None, help="override every workload's request count")
    ap.add_argument("--output-len", type=int, default=None)
    ap.add_argument("--max-num-batched-tokens", type=int, default=None)
    ap.add_argument("--max-model-len", type=int, default=None)
    ap.add_argument("--eager", action=argparse.BooleanOptionalAction, default=None,
                    help="--enforce-eager (CPU presets: on, compile takes minutes; h200: off, CUDA graphs on)")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--load-format", default=None, help="e.g. dummy (h200 default)")
    ap.add_argument("--gpu-memory-utilization", default=None)
    ap.add_argument("--extra-args", default="", help="more `vllm serve` args for every backend")
    ap.add_argument("--startup-timeout", type=float, default=900)
    ap.add_argument("--one-server", action="store_true",
                    help="one server per backend, prefix caching on for every workload (halves server starts)")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--merge", nargs="+", type=Path, default=None, metavar="RESULTS_JSON",
                    help="write one report (--out) from several runs' results.json (servers pool) and exit")
    return ap, ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    ap, args = parse_args(argv)
    if args.merge:
        if args.out is None:
            ap.error("--merge needs --out")
        args.out.mkdir(parents=True, exist_ok=True)
        report = merge_reports([json.loads(f.read_text()) for f in args.merge], [str(f) for f in args.merge])
        for f in write_report(report, args.out, with_plots=not args.no_plots):
            print(f)
        print(args.out / "summary.md")
        return 0
    P = PRESETS[args.preset]
    cpu = args.preset.startswith("cpu")
    workloads = [Workload(**asdict(w)) for w in P["workloads"]]
    if args.workloads:
        want = [x.strip() for x in args.workloads.split(",") if x.strip()]
        unknown = set(want) - {w.name for w in workloads}
        if unknown:
            ap.error(f"unknown workloads {sorted(unknown)}; preset {args.preset} has {[w.name for w in workloads]}")
        workloads = [w for w in workloads if w.name in want]
    for w in workloads:
        if args.num_requests:
            w.num_requests = max(args.num_requests, 1)
        if args.output_len:
            w.output_len = args.output_len
    if args.list:
        for w in workloads:
            print(json.dumps(asdict(w)))
        return 0
    try:
        backends = parse_backends(args.backends or ("qla,auto" if cpu else "qla,auto,triton"))
    except ValueError as exc:
        ap.error(str(exc))
    for b in backends:
        if cpu and base_of(b) in ("triton", "flashinfer"):
            print(f"note: on vLLM's CPU build `{b}` runs the same CPU GDN op as `auto`", flush=True)

    model = args.model or P["model"]
    if cpu and not (model / "config.json").exists():
        import tiny_model

        print(f"building tiny Qwen3-Next model in {model}", flush=True)
        tiny_model.build(model, seed=args.seed)
    max_model_len = args.max_model_len or max(P["max_model_len"], max(w.max_len + w.output_len for w in workloads))
    mnbt = args.max_num_batched_tokens or P["max_num_batched_tokens"]
    eager = P["eager"] if args.eager is None else args.eager
    common = ["--max-model-len", str(max_model_len), "--max-num-batched-tokens", str(mnbt),
              "--seed", str(args.seed)]
    if args.tp > 1:
        common += ["--tensor-parallel-size", str(args.tp)]
    load_format = args.load_format or (None if cpu else "dummy")
    if load_format:
        common += ["--load-format", load_format]
    if args.gpu_memory_utilization:
        common += ["--gpu-memory-utilization", args.gpu_memory_utilization]
    if eager:
        common.append("--enforce-eager")
    common += args.extra_args.split()

    out = args.out or HERE / "results" / args.preset
    out.mkdir(parents=True, exist_ok=True)
    # The model is named relative to the checkout, so results resume across clones of the repo.
    model_name = str(model.resolve().relative_to(ROOT)) if model.resolve().is_relative_to(ROOT) else str(model)
    config = {"preset": args.preset, "model": model_name, "common_args": common,
              "prefix_caching": "on for every workload" if args.one_server else "on for prefix workloads only"}
    report = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() and not args.fresh else None
    if report is not None and report.get("config") != config:
        print(f"error: {out / 'results.json'} was made with another configuration:\n  {report.get('config')}\n"
              f"  now {config}\nrerun with --fresh (discards it) or another --out", file=sys.stderr)
        return 2
    resuming = report is not None       # an earlier start's traces belong to its cells: keep them
    if report is None:
        report = {"config": config, "cells": {}, "workloads": [],
                  "host": {"node": platform.node(), "cpu_count": os.cpu_count(), "gpu": None if cpu else gpu_name()},
                  "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    known = {w["name"] for w in report["workloads"]}
    report["workloads"] += [asdict(w) for w in workloads if w.name not in known]

    from tqdm import tqdm

    vocab = P["vocab"]
    group = (lambda w: True) if args.one_server else (lambda w: w.prefix_caching)
    done = lambda b, w: all(w.name in report["cells"].get(c, {}) for c in cell_labels(b))  # noqa: E731
    for b in backends:
        sides = paired_sides(b)
        paired = bool(sides)
        for pc in (False, True):
            todo = [w for w in workloads if group(w) == pc and not done(b, w)]
            skipped = [w.name for w in workloads if group(w) == pc and done(b, w)]
            if skipped:
                print(f"[{b}] resume: {', '.join(skipped)} already in results.json (--fresh reruns)", flush=True)
            if not todo:
                continue
            tag = f"{b}{'-prefix' if pc else ''}"
            trace, steps_path = out / TRACE_GLOB.format(tag), out / TRACE_GLOB.format(f"steps-{tag}")
            for path in (trace, steps_path):
                if resuming:
                    keep_previous(path)
                else:
                    path.unlink(missing_ok=True)
            env = {"QLA_VLLM_STEP_TIMING": str(steps_path), **BACKEND_ENV.get(base_of(b), {})}
            switch = out / f"ab-switch-{tag}" if paired else None
            if switch is not None:
                switch.unlink(missing_ok=True)
                env["QLA_VLLM_AB_SWITCH"] = str(switch)
            if base_of(b) in QLA_BACKENDS or paired:
                env["QLA_VLLM_TRACE"] = str(trace)
            args_b = BACKENDS[server_of(b)][0] + common + ["--enable-prefix-caching" if pc else "--no-enable-prefix-caching"]
            print(f"[{tag}] vllm serve {' '.join(args_b)}", flush=True)
            t0 = time.perf_counter()
            srv = VLLMServer(model, args_b, env=env, log_path=out / f"server-{tag}.log",
                             startup_timeout=args.startup_timeout)
            windows = []
            interrupted = False
            try:
                srv.start()
                startup_s = time.perf_counter() - t0
                print(f"[{tag}] healthy after {startup_s:.0f}s (pid {srv.proc.pid}); warming up", flush=True)
                # A paired server warms both paths (fresh prompts for the second: the first's would
                # hit the prefix cache and skip the prefill shapes the second path has to build).
                for k, side in enumerate(sides or [None]):
                    set_switch(switch, side)
                    warm_up(srv, todo, args.seed + 7 + 1000 * k, vocab)
                for w in todo:
                    seed = args.seed + sum(map(ord, w.name))
                    if paired:   # each side: the workload's full count of its own prompts, equal lengths
                        blocks = paired_blocks(w, seed, vocab, sides[1])
                    else:
                        blocks = [(None, w.prompts(seed, vocab))]
                    if w.kind == "prefix":   # cache the shared prefix first: the stream measures reuse
                        asyncio.run(drive(srv.url, srv.served_name, [blocks[0][1][0][:w.prefix_len]], 1, 2))
                    by_side: dict = {}
                    load0 = os.getloadavg()
                    with tqdm(total=sum(len(p) for _, p in blocks), desc=f"{tag} {w.name}", unit="req") as bar:
                        for side, prompts in blocks:
                            set_switch(switch, side)
                            got = by_side.setdefault(side, {"res": [], "windows": [], "hits": []})
                            hits0 = prefix_counters(srv)
                            ta = time.time()
                            got["res"] += asyncio.run(drive(srv.url, srv.served_name, prompts, w.concurrency,
                                                            w.output_len, bar))
                            got["windows"].append((ta, time.time()))
                            hits1 = prefix_counters(srv)
                            got["hits"].append({k: hits1[k] - hits0[k] for k in hits0} if hits0 and hits1 else None)
                    for side, got in by_side.items():
                        s = summarize(got["res"])
                        s.update(startup_s=startup_s, loadavg=[load0[0], os.getloadavg()[0]],
                                 wall_s=sum(t1 - t0 for t0, t1 in got["windows"]), windows=got["windows"])
                        s["prefix_cache"] = None if None in got["hits"] else {
                            k: sum(h[k] for h in got["hits"]) for k in got["hits"][0]}
                        label = f"{b}:{side}" if side else b
                        windows.append((label, side, w, s, [r for r in got["res"] if r.error is None]))
                set_switch(switch, "qla")
                _flush_steps(srv)
            except KeyboardInterrupt:
                # A deadline (run_h200.sh: timeout --signal=INT): keep the workloads that finished.
                interrupted = True
                print(f"\n[{tag}] interrupted: keeping {len(windows)} finished workload(s)", flush=True)
                if windows and srv.proc is not None:
                    try:
                        _flush_steps(srv)
                    except BaseException:
                        pass
            finally:
                srv.stop()
            steps = read_jsonl(steps_path)
            calls = read_jsonl(trace)
            for label, side, w, s, ok in windows:
                wins = s["windows"]
                ttft_sum = sum(r.ttft_ms for r in ok) if w.concurrency == 1 else None
                s["gdn"] = gdn_share(steps, wins, ttft_sum, side_path(side) if side else None)
                if base_of(label) in QLA_BACKENDS:
                    s["qla_calls"] = sum(1 for c in calls if any(t0 <= c.get("t", t0) <= t1 for t0, t1 in wins)) \
                        if calls and "t" in calls[0] else len(calls)
                report["cells"].setdefault(label, {})[w.name] = s
                g = s["gdn"]
                print(f"[{tag}{':' + side if side else ''}] {w.name}: TTFT p50 {fmt(s['ttft_ms']['p50'])} ms, TPOT p50 {fmt(s['tpot_ms']['p50'])} ms, "
                      f"failed {s['failed']}; GDN {fmt(g.get('gdn_ms_per_step'), '.2f')} ms/step over {g['steps']} "
                      f"prefill steps, share of step {fmt(100 * g['share_of_step'] if g.get('share_of_step') else None)}%",
                      flush=True)
            write_report(report, out, with_plots=False)      # resume point
            if interrupted:
                write_report(report, out, with_plots=not args.no_plots)
                print(f"interrupted: {out / 'results.json'} holds the finished cells; rerun to resume")
                return 130
    written = write_report(report, out, with_plots=not args.no_plots)
    print()
    print((out / "summary.md").read_text())
    print(f"wrote {out / 'results.json'}, {out / 'summary.md'}" + "".join(f", {p.name}" for p in written))
    sel = [report["cells"].get(c, {}).get(w.name) for b in backends for c in cell_labels(b) for w in workloads]
    return 0 if all(s is not None and s["failed"] == 0 for s in sel) else 1


if __name__ == "__main__":
    sys.exit(main())
