"""End to end on vLLM's CPU build: greedy tokens with and without qla-serve must be identical.

Chunked prefill is forced (128 tokens per step), so long prompts cross many steps and every
later chunk reads the recurrent state the previous one wrote into vLLM's cache in place.
"""
from __future__ import annotations

import random
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

LENGTHS = [1, 2, 3, 17, 63, 64, 65, 127, 128, 129, 255, 256, 257, 600, 1000, 1500, 2000]
OUT_TOKENS = 8


def prompts(lengths, seed):
    rng = random.Random(seed)
    return [[rng.randrange(3, 2048) for _ in range(n)] for n in lengths]


# Logits are bf16, and a logprob gap between two tokens is the gap between their bf16 logits, so
# its resolution is the logits' spacing, not the logprobs': the tiny model's logits have std
# 0.5·sqrt(hidden) = 8 (tiny_model.py), its top candidates sit at |logit| ≈ 25–40, where
# neighbouring bf16 values are 0.125–0.25 apart. Two correct kernels that differ by one rounding can
# swap two candidates that were (nearly) tied. A divergence passes only as such a tie: at each
# differing position, each server ranks the other's token within one bf16 step of its own (0.25,
# the step for |logit| in [32, 64)). Anything else (a real error in the state) fails. (0.2 until
# session 17, calibrated on logprob spacing: the environment of 2026-12-01 turned up a 2000-token
# prompt whose top two logits tie exactly in vLLM's path and sit 0.25 apart in qla-serve's; session
# 16's code gives the same there.)
TIE_TOL = 0.25


def greedy(server, ids, n=OUT_TOKENS):
    return server.complete(ids, n, logprobs=5)


def tie_gap(choice, i, other_text) -> float:
    """How far below its own pick this server ranked the other server's token at step ``i``."""
    lp = choice["logprobs"]
    other = lp["top_logprobs"][i].get(other_text)
    return float("inf") if other is None else lp["token_logprobs"][i] - other


def compare_greedy(pair, ids, b, q, ties, bad) -> None:
    """Compare two servers' greedy continuations of ``ids`` token by token.

    A divergence must be a tie (each server ranks the other's token within one bf16 step of its
    own); then both servers continue from the base server's token, so every position is compared and
    a tie costs no coverage. Near-ties are common in this tiny model and whether one flips depends
    on the batch a request shared (concurrent requests land in different steps on the two servers),
    so the number of ties is noise and is not bounded; their size is. The continuation requests run
    one at a time, so what they find does not depend on scheduling.
    """
    while b["token_ids"] != q["token_ids"]:
        i = next(k for k, (x, y) in enumerate(zip(b["token_ids"], q["token_ids"])) if x != y)
        gaps = (tie_gap(b, i, q["logprobs"]["tokens"][i]), tie_gap(q, i, b["logprobs"]["tokens"][i]))
        if max(gaps) > TIE_TOL:
            bad.append((len(ids), i, gaps, b["token_ids"], q["token_ids"]))
            return
        ties.append((len(ids), i, gaps))
        rest = len(b["token_ids"]) - i - 1
        if rest == 0:
            return
        ids = list(ids) + b["token_ids"][:i + 1]
        b, q = greedy(pair.base, ids, rest), greedy(pair.qla, ids, rest)


def assert_same_tokens(pair, batch, *, concurrent=False):
    def run(server):
        if concurrent:
            with ThreadPoolExecutor(len(batch)) as ex:
                return list(ex.map(lambda ids: greedy(server, ids), batch))
        return [greedy(server, ids) for ids in batch]

    base, qla = run(pair.base), run(pair.qla)
    ties, bad = [], []
    for ids, b, q in zip(batch, base, qla):
        compare_greedy(pair, ids, b, q, ties, bad)
    assert not bad, f"greedy tokens differ beyond a tie (prompt length, step, logprob gaps, vLLM, qla): {bad}"
    if ties:
        print(f"tie flips (bf16 near-ties, allowed; both servers continued from vLLM's token): {ties}")


def assert_qla_ran(pair, min_tokens):
    recs = pair.trace_records()
    assert recs, f"qla-serve never ran a prefill in the worker (no trace in {pair.trace})"
    assert pair.qla.proc.pid not in {r["pid"] for r in recs}, "the trace should come from the worker process"
    assert sum(r["tokens"] for r in recs) >= min_tokens
    assert not pair.base_trace.exists(), "the base server (qla not selected) ran qla-serve"


def test_prompt_lengths_no_prefix_cache(pair_no_prefix_cache, chunk):
    before = len(pair_no_prefix_cache.trace_records())
    batch = prompts(LENGTHS, seed=1)
    assert_same_tokens(pair_no_prefix_cache, batch)
    new = pair_no_prefix_cache.trace_records()[before:]
    assert sum(r["tokens"] for r in new) >= sum(LENGTHS), "qla-serve did not serve every prompt token"
    assert max(r["max_seqlen"] for r in new) == chunk, "chunked prefill was not forced"
    assert_qla_ran(pair_no_prefix_cache, sum(LENGTHS))



def test_concurrent_mixed_batches(pair_no_prefix_cache):
    """Concurrent requests: prefill chunks share steps with other requests' decode tokens."""
    batch = prompts([5, 40, 130, 300, 700, 64, 1, 999], seed=2)
    before = len(pair_no_prefix_cache.trace_records())
    assert_same_tokens(pair_no_prefix_cache, batch, concurrent=True)
    new = pair_no_prefix_cache.trace_records()[before:]
    assert any(r["seqs"] > 1 for r in new), "no step batched several prefills"
    assert any(r["decodes"] > 0 for r in new), "no step mixed decodes with prefills"


def test_prompt_lengths_prefix_cache(pair_prefix_cache):
    assert_same_tokens(pair_prefix_cache, prompts([1, 64, 129, 600, 2000], seed=3))
    assert_qla_ran(pair_prefix_cache, 1 + 64 + 129 + 600 + 2000)


def prefix_hits(server) -> float:
    with urllib.request.urlopen(server.url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:prefix_cache_hits") and not line.startswith("#"))


def test_prefix_reuse(pair_prefix_cache):
    """A shared prefix is served from the cache (the state resumes mid-prompt) on both servers."""
    rng = random.Random(4)
    prefix = [rng.randrange(3, 2048) for _ in range(1100)]
    batch = [prefix + [rng.randrange(3, 2048) for _ in range(n)] for n in (7, 150, 400)]
    hits = [prefix_hits(s) for s in (pair_prefix_cache.base, pair_prefix_cache.qla)]
    assert_same_tokens(pair_prefix_cache, [prefix] + batch)
    after = [prefix_hits(s) for s in (pair_prefix_cache.base, pair_prefix_cache.qla)]
    assert after[1] > hits[1], "the qla server never hit its prefix cache"
    assert after[0] - hits[0] == after[1] - hits[1], "both servers should reuse the same cached tokens"


def test_gdn_prefill_backend_flag_serves(tiny_model_dir, serve_args, tmp_path):
    """`vllm serve --gdn-prefill-backend qla` parses and runs qla-serve in the worker."""
    from server import VLLMServer

    trace = tmp_path / "trace.jsonl"
    with VLLMServer(tiny_model_dir, serve_args + ["--gdn-prefill-backend", "qla"],
                    env={"QLA_VLLM_TRACE": str(trace)}, log_path=tmp_path / "server.log") as s:
        out = greedy(s, prompts([300], seed=5)[0])
    assert len(out["token_ids"]) == OUT_TOKENS
    assert trace.exists() and sum(1 for _ in trace.open()) > 0
    # The worker asked to preload qla-serve's kernels, once (on CPU none exist: it says why).
    said = [l for l in (tmp_path / "server.log").read_text().splitlines() if "no kernels preloaded" in l]
    assert len(said) == 1 and "no qla-serve kernel for cpu devices" in said[0], said


def test_fallback_is_vllms_own_path_with_one_log_line(pair_no_prefix_cache, serve_args, tmp_path):
    """When qla-serve cannot take a call, the layer runs vLLM's path (bit-identical) and says why once."""
    from server import VLLMServer

    trace, log = tmp_path / "trace.jsonl", tmp_path / "server.log"
    batch = prompts([70, 300], seed=6)
    with VLLMServer(pair_no_prefix_cache.base.model, serve_args + ["--no-enable-prefix-caching", "--attention-backend", "qla"],
                    env={"QLA_VLLM_TRACE": str(trace), "QLA_VLLM_FORCE_FALLBACK": "1"}, log_path=log) as s:
        got = [greedy(s, ids) for ids in batch]
    want = [greedy(pair_no_prefix_cache.base, ids) for ids in batch]
    for g, w in zip(got, want):
        assert g["token_ids"] == w["token_ids"]
        assert g["logprobs"]["token_logprobs"] == w["logprobs"]["token_logprobs"]
    lines = [l for l in log.read_text().splitlines() if "falls back to vLLM's own path" in l]
    assert len(lines) == 1, lines
    assert "QLA_VLLM_FORCE_FALLBACK" in lines[0]
    assert not trace.exists()
