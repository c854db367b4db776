"""GPU check of the vLLM plugin: vLLM's own GDN prefill vs ``--attention-backend qla``, same prompts.

Run by ``bench_serving/gpu_vllm_check.sh`` on the H200 (vLLM 0.26.0 from ``.gpu-vllm``). The qla
server and one reference server per ``--ref`` backend (one after another) share the GPU
(``--gpu-memory-utilization`` split) or, with ``--parallel``, sit on separate GPUs; the same greedy
requests go to each, and the report compares generated tokens, their logprobs, and the prompt
logprobs (teacher-forced, so one early flip does not hide the rest) per reference backend. Writes
``<out>/gpu_vllm_check.json`` and server logs.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from server import VLLMServer  # noqa: E402

LENGTHS = [1, 2, 63, 64, 65, 129, 1000, 4000, 8192]
CONCURRENT = [7, 300, 2048, 5000, 64, 1, 900, 3000]


def prompts(lengths, seed, vocab):
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(n)] for n in lengths]


def visible_devices() -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as a list, or None when unset (another job may hold the other GPUs)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return None if visible is None else [d for d in visible.split(",") if d.strip()]


def gpu_count() -> int:
    """GPUs this process may use: the visible ones when CUDA_VISIBLE_DEVICES is set."""
    import subprocess

    visible = visible_devices()
    if visible is not None:
        return len(visible)
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def compare(a: dict, b: dict, ids: list[int]) -> dict:
    same = a["token_ids"] == b["token_ids"]
    first_diff = next((i for i, (x, y) in enumerate(zip(a["token_ids"], b["token_ids"])) if x != y), None)
    # logprobs of the generated tokens up to the first difference
    la, lb = a["logprobs"]["token_logprobs"], b["logprobs"]["token_logprobs"]
    n = len(la) if first_diff is None else first_diff
    gen_lp = max([abs(x - y) for x, y in zip(la[:n], lb[:n])] or [0.0])
    pl = 0.0
    pa, pb = a.get("prompt_logprobs") or [], b.get("prompt_logprobs") or []
    for x, y, t in zip(pa[1:], pb[1:], ids[1:]):
        if x and y and str(t) in x and str(t) in y:
            pl = max(pl, abs(x[str(t)]["logprob"] - y[str(t)]["logprob"]))
    return {"prompt_len": len(ids), "tokens_equal": same, "first_diff": first_diff,
            "gen_logprob_maxdiff": gen_lp, "prompt_logprob_maxdiff": pl,
            "ref_tokens": a["token_ids"], "qla_tokens": b["token_ids"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--ref", default="triton",
                    help="--gdn-prefill-backend of the reference server(s), comma-separated (e.g. triton,flashinfer)")
    ap.add_argument("--qla-args", default="--attention-backend qla")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--eager", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--load-format", default="dummy")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--max-num-batched-tokens", type=int, default=2048)
    ap.add_argument("--prefix-caching", action=argparse.BooleanOptionalAction, default=False)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--startup-timeout", type=float, default=480)
    ap.add_argument("--lengths", default=",".join(map(str, LENGTHS)), help="sequential prompt lengths")
    ap.add_argument("--concurrent-lengths", default=",".join(map(str, CONCURRENT)))
    ap.add_argument("--max-model-len", type=int, default=16384)
    ap.add_argument("--gpu-memory-utilization", default="0.40", help="per server (both share the GPU)")
    ap.add_argument("--parallel", choices=("auto", "on", "off"), default="auto",
                    help="start both servers at once, each on its own TP GPUs (auto: when there are 2×TP GPUs)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    common = ["--max-model-len", str(args.max_model_len), "--max-num-batched-tokens", str(args.max_num_batched_tokens),
              "--tensor-parallel-size", str(args.tp),
              "--load-format", args.load_format, "--seed", "0", "--max-num-seqs", "32",
              "--enable-prefix-caching" if args.prefix_caching else "--no-enable-prefix-caching"]
    if args.gpu_memory_utilization:
        common += ["--gpu-memory-utilization", args.gpu_memory_utilization]
    if args.eager:
        common.append("--enforce-eager")
    env = {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
    refs = [r for r in args.ref.split(",") if r]
    parallel = args.parallel == "on" or (args.parallel == "auto" and gpu_count() >= 2 * args.tp)
    env_ref, env_qla = dict(env), dict(env)
    if parallel:  # separate GPUs: the engines cannot misjudge each other's memory
        devices = visible_devices() or [str(i) for i in range(2 * args.tp)]
        env_ref["CUDA_VISIBLE_DEVICES"] = ",".join(devices[:args.tp])
        env_qla["CUDA_VISIBLE_DEVICES"] = ",".join(devices[args.tp:2 * args.tp])
    trace = args.out / "qla-trace.jsonl"
    trace.unlink(missing_ok=True)
    qla = VLLMServer(args.model, common + args.qla_args.split(), env={**env_qla, "QLA_VLLM_TRACE": str(trace)},
                     log_path=args.out / "server-qla.log", startup_timeout=args.startup_timeout)
    report: dict = {"model": str(args.model), "common_args": common, "refs": refs, "qla_args": args.qla_args,
                    "tp": args.tp, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "QLA_BACKEND": os.environ.get("QLA_BACKEND", "auto"), "parallel_start": parallel,
                    "startup_s": {}, "by_ref": {}, "prefix_cache_hit_tokens": {}}
    lengths = [int(x) for x in args.lengths.split(",")]
    seq_prompts = prompts(lengths, 1, args.vocab)
    reuse_prompts = []
    if args.prefix_caching and seq_prompts:
        # Prompts that reuse the longest one's cached prefix: their prefill starts from a state
        # restored by prefix caching ("align" mode) instead of zero. Sent without prompt logprobs:
        # vLLM skips reading the prefix cache for requests that ask for them.
        longest = max(seq_prompts, key=len)
        reuse_prompts = [longest[: len(longest) // 2] + p for p in prompts([300, 1], 3, args.vocab)] + [list(longest)]
    conc_prompts = prompts([int(x) for x in args.concurrent_lengths.split(",")], 2, args.vocab)
    kw = dict(logprobs=5, prompt_logprobs=1)

    def collect(server) -> tuple[list, list]:
        """Greedy completions: the sequential prompts one by one, then the mixed batch at once."""
        seq = [server.complete(ids, args.max_tokens, **kw) for ids in seq_prompts]
        if reuse_prompts:
            hits0 = server.metric_sum("vllm:prefix_cache_hits_total")
            seq += [server.complete(ids, args.max_tokens, logprobs=5) for ids in reuse_prompts]
            report["prefix_cache_hit_tokens"][server.log_path.stem] = \
                server.metric_sum("vllm:prefix_cache_hits_total") - hits0
        with ThreadPoolExecutor(len(conc_prompts)) as ex:
            conc = list(ex.map(lambda ids: server.complete(ids, args.max_tokens, **kw), conc_prompts))
        return seq, conc

    def write_report() -> None:
        """The JSON so far (after every reference: a deadline that stops a later one keeps the earlier)."""
        recs = [json.loads(x) for x in trace.read_text().splitlines()] if trace.exists() else []
        log = (args.out / "server-qla.log").read_text(errors="replace") if (args.out / "server-qla.log").exists() else ""
        report["qla_trace"] = {"calls": len(recs), "tokens": sum(r["tokens"] for r in recs),
                               "pids": sorted({r["pid"] for r in recs})}
        report["qla_log_lines"] = sorted({re.sub(r"^.*?\] ", "", l) for l in log.splitlines() if "qla-serve" in l})[:20]
        report["summary"] = {name: r["summary"] for name, r in report["by_ref"].items()}
        report["summary"]["qla_ran"] = report["qla_trace"]["calls"] > 0
        if report["prefix_cache_hit_tokens"]:
            report["summary"]["prefix_cache_hit_tokens"] = report["prefix_cache_hit_tokens"]
        (args.out / "gpu_vllm_check.json").write_text(json.dumps(report, indent=1))

    # qla's outputs are collected once and compared with each reference backend in turn; with
    # --parallel the first reference starts beside qla on its own GPUs, later ones replace it there.
    qla_out = None
    try:
        for name in refs:
            ref = VLLMServer(args.model, common + ["--gdn-prefill-backend", name], env=env_ref,
                             log_path=args.out / f"server-{name}.log", startup_timeout=args.startup_timeout)
            t0 = time.time()
            try:
                if qla_out is None and parallel:
                    ref.launch()
                    qla.launch()
                    ref.wait_healthy()
                    qla.wait_healthy()
                elif qla_out is None:
                    # One at a time: two engines initialising at once on one GPU can misjudge free memory.
                    ref.start()
                    qla.start()
                else:
                    ref.start()
                report["startup_s"][name] = time.time() - t0
                print(f"[{name}] servers healthy after {report['startup_s'][name]:.0f} s", flush=True)
                if qla_out is None:
                    qla_out = collect(qla)
                ref_out = collect(ref)
            finally:
                ref.stop()
            seq = [compare(a, b, ids) for a, b, ids in zip(ref_out[0], qla_out[0], seq_prompts + reuse_prompts)]
            conc = [compare(a, b, ids) for a, b, ids in zip(ref_out[1], qla_out[1], conc_prompts)]
            rows = seq + conc
            report["by_ref"][name] = {"sequential": seq, "concurrent": conc, "summary": {
                "prompts": len(rows),
                "tokens_equal": sum(r["tokens_equal"] for r in rows),
                "max_prompt_logprob_diff": max(r["prompt_logprob_maxdiff"] for r in rows),
                "max_gen_logprob_diff_before_divergence": max(r["gen_logprob_maxdiff"] for r in rows)}}
            print(f"[{name}] vs qla:", json.dumps(report["by_ref"][name]["summary"]), flush=True)
            write_report()
    finally:
        qla.stop()
    write_report()
    print(json.dumps(report["summary"], indent=1))
    print("qla-serve log lines:", *report["qla_log_lines"], sep="\n  ")
    for name, r in report["by_ref"].items():
        for row in r["sequential"] + r["concurrent"]:
            print(f"  {name} len {row['prompt_len']:>5}: tokens {'==' if row['tokens_equal'] else '!='} "
                  f"(first diff {row['first_diff']}), prompt-lp maxdiff {row['prompt_logprob_maxdiff']:.4f}")
    return 0 if report["summary"]["qla_ran"] else 1


if __name__ == "__main__":
    sys.exit(main())
