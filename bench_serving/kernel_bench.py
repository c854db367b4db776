"""GDN prefill kernels on one GPU: QLA (TileLang, pool by index) vs FLA Triton vs FlashQLA 0.1.3
(vs FlashInfer's gdn_prefill when importable).

(a) kernel time: metadata cached (QLA plan; FLA chunk_indices + cu_seqlens_cpu; FlashQLA cp_context),
    initial/final states as each library wants them (FLA/FlashQLA: a dense [N, HV, V, K] fp32 h0);
(b) serving path: a fresh cu_seqlens every call, states living in a pool [slots, HV, V, K] fp32:
    QLA plans on the host and reads/writes the pool in place; the others pay the gather
    (h0 = pool[idx]) and the scatter (pool[idx] = ht). QLA keeps its host tables and choices per
    batch shape (since session 28), so its repeated calls pay the plan's device copy, not its host
    work; ``qla_host_plan_and_call_cold_us`` times a shape seen for the first time.
Times are do_bench medians (ms). When a backend's host work per call outlasts its GPU work, that
wall time is the host's, and it changes with the host instance. Each (a) row therefore also records
``<backend>_gpu_ms``: GPU-busy time per call from torch's profiler, with no host gaps. Issue 3's (a)
is counted on both. Writes kernels.json, kernels.md and kernels.png into $OUT (or --out).

    FLA_FLASH_QLA=0 python bench_serving/kernel_bench.py [--quick] [--out DIR]

CP sweep (issue 4): ``--cp-sweep`` times QLA's whole prefill (do_bench wall ms and GPU-busy ms) with
the longest sequence forced to P ∈ {1, 2, 4, 8, 16, 32} partitions (QLA_CP_PARTS) on rows 1×32768, 1×16384, 1×8192, 28672+4096,
1×4096, 1×2048 for heads 2/8, 4/16, 8/32, 16/32, writes cp_sweep.json and fits the CP rule's
constants into cp_fit.json:

    python bench_serving/kernel_bench.py --cp-sweep --out $OUT [--cp-block-v 64,128] [--heads 2/8]

``--isolate`` times each backend's rows in a process of its own (one after another; the agreement
check then runs in the parent), as a server runs one backend: in one process the backends' host
work slows each other's (session 29: FlashQLA's serving path 16/32 64×128 2.44 ms in the shared
process, 1.33 alone; QLA's moved less).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time

os.environ.setdefault("FLA_FLASH_QLA", "0")       # FLA must not dispatch to FlashQLA
# gpu_ms() runs torch's profiler on every row. Unless TEARDOWN_CUPTI=1, Kineto leaves CUPTI attached
# when the profiler stops, and later launches in the process pay its callbacks: session 31 on the
# H200's host, 10.0 → 13.8 µs per launch after one profiler session in one process (7.1 → 7.5 with
# teardown). Every row after a process's first was timed after such a session (host-bound serving
# and kernel columns, every backend) until session 31. At the table's level session 32 saw no
# difference (six processes, 0 / 1 alternating): the host's drift over seconds is far larger.
os.environ.setdefault("TEARDOWN_CUPTI", "1")

import torch  # noqa: E402

HEADS = [(16, 32), (16, 64), (16, 48), (8, 32), (4, 16), (2, 8)]
SEQLENS = {
    "1x32768": [32768],
    "1x16384": [16384],
    "1x8192": [8192],
    "28672+4096": [28672, 4096],
    "1x2048": [2048],
    "16384+16384": [16384, 16384],
    "8192x4": [8192] * 4,
    "1024x8": [1024] * 8,
    "16x512": [512] * 16,
    "64x128": [128] * 64,
    "7000+600+300+200+92": [7000, 600, 300, 200, 92],
    "256x1+4096": [1] * 256 + [4096],
}
K = V = 128


def mix_seqlens(name: str) -> list[int]:
    """A named mix of SEQLENS, or an ad-hoc one: terms joined by "+", each LENGTH or COUNT*LENGTH
    (e.g. "16384+64*16": one 16384-token sequence and 64 of 16 tokens)."""
    if name in SEQLENS:
        return SEQLENS[name]
    try:
        out = []
        for term in name.split("+"):
            count, _, length = term.rpartition("*")
            out += [int(length)] * (int(count) if count else 1)
    except ValueError:
        raise SystemExit(f"--mixes: {name!r} is neither one of {sorted(SEQLENS)} nor of the form 16384+64*16") from None
    if not out or min(out) < 1:
        raise SystemExit(f"--mixes: {name!r} needs positive lengths")
    return out


def versions() -> dict:
    out = {"torch": torch.__version__, "python": platform.python_version(),
           "cuda": torch.version.cuda, "TEARDOWN_CUPTI": os.environ.get("TEARDOWN_CUPTI")}
    for name in ("tilelang", "fla", "flash_qla", "flashinfer", "triton"):
        try:
            mod = __import__(name)
            out[name] = getattr(mod, "__version__", "?")
        except Exception as exc:  # noqa: BLE001
            out[name] = None if isinstance(exc, ImportError) else f"import failed: {exc!r}"[:120]
    import subprocess
    try:
        out["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                       capture_output=True, text=True).stdout.strip()
    except Exception:  # noqa: BLE001
        pass
    return out


def bench(fn, warmup=3, rep=25) -> float:
    from triton.testing import do_bench
    return float(do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))


def busy_us(intervals) -> float:
    """Time covered by the union of (start, end) intervals: the GPU's busy time, overlaps once."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0.0)


def device_events(fn, reps: int = 10) -> list:
    """The device activities (kernels, copies, memsets) torch's profiler records over ``reps`` calls
    of ``fn`` after one untimed call; synchronisations are waits, not work, and are left out."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    return [e for e in prof.events() if e.device_type == DeviceType.CUDA and "Synchronize" not in e.name]


def gpu_ms(fn, reps: int = 10) -> float | None:
    """GPU-busy milliseconds per call: the union of the device activities (:func:`device_events`)
    over ``reps`` calls. do_bench's wall time also counts the gaps where the GPU waits for the host,
    so it changes with the host instance (session 7: FlashQLA's short rows ran 1.5× apart on two
    hosts while QLA's cached-plan rows agreed). This figure does not."""
    spans = [(e.time_range.start, e.time_range.end) for e in device_events(fn, reps)]
    return busy_us(spans) / reps / 1e3 if spans else None


def rel_l2(a: torch.Tensor, ref: torch.Tensor) -> float:
    """Relative L2 distance ‖a − ref‖ / ‖ref‖ (NaN where ``a`` has unwritten, NaN-poisoned rows)."""
    return float((a.double() - ref.double()).norm() / ref.double().norm())


def _g(x) -> str:
    return "—" if x is None else f"{x:.2e}"


# QLA_BENCH_POOL=bf16: the state pool in bf16 (vLLM's ssm cache dtype for these models) instead of
# fp32; for QLA-only runs (the anchors' serving paths are timed on fp32 pools).
_POOL_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
_BENCH_POOL = os.environ.get("QLA_BENCH_POOL", "fp32")
if _BENCH_POOL not in _POOL_DTYPES:
    raise ValueError(f"QLA_BENCH_POOL={_BENCH_POOL!r}: expected one of {sorted(_POOL_DTYPES)}")
BENCH_POOL_DTYPE = _POOL_DTYPES[_BENCH_POOL]


def make_inputs(seqlens, H, HV, seed=0, dev="cuda"):
    gen = torch.Generator(device=dev).manual_seed(seed)
    T, N = sum(seqlens), len(seqlens)
    q = torch.nn.functional.normalize(torch.randn(T, H, K, device=dev, generator=gen), dim=-1).bfloat16()
    k = torch.nn.functional.normalize(torch.randn(T, H, K, device=dev, generator=gen), dim=-1).bfloat16()
    v = torch.randn(T, HV, V, device=dev, generator=gen).bfloat16()
    g = torch.nn.functional.logsigmoid(torch.randn(T, HV, device=dev, generator=gen) + 2.0)  # ≈ −0.1 typical
    beta = torch.rand(T, HV, device=dev, generator=gen)
    pool = (torch.randn(N + 1, HV, V, K, device=dev, generator=gen) * 0.1).to(BENCH_POOL_DTYPE)
    idx = torch.arange(1, N + 1, dtype=torch.int32, device=dev)
    cu_cpu = torch.tensor([0] + torch.tensor(seqlens).cumsum(0).tolist(), dtype=torch.int32)
    return dict(q=q, k=k, v=v, g=g, beta=beta, pool=pool, idx=idx, cu_cpu=cu_cpu, N=N, T=T)


# ---------------------------------------------------------------------------------------------- QLA

# QLA_BENCH_INPUTS=packed-l2norm: QLA reads q/k/v as views of one [T, 2·H·K + HV·V] buffer (an
# engine's conv output) and l2-normalises q, k itself, as an adapter does when it skips the engine's
# q/k/v copy-and-normalise pass; the other backends keep their contiguous inputs.
PACKED_L2NORM = os.environ.get("QLA_BENCH_INPUTS", "contiguous") == "packed-l2norm"


def qla_plan(cu_cpu, device):
    """A qla-serve plan for this bench's inputs: :func:`make_inputs` l2-normalises k, so the plan
    declares unit-norm keys (CP may start partitions from their tails, as in the engines)."""
    import qla_serve

    return qla_serve.plan_prefill(cu_cpu, device=device, unit_norm_keys=True)


def qla_fns(x):
    import qla_serve

    dev = torch.device("cuda", torch.cuda.current_device())
    plan = qla_plan(x["cu_cpu"], dev)
    out = torch.empty_like(x["v"])
    hinit = torch.ones(x["N"], dtype=torch.bool, device="cuda")
    q, k, v = x["q"], x["k"], x["v"]
    if PACKED_L2NORM:
        T, H, HV = q.shape[0], q.shape[1], v.shape[1]
        mixed = torch.cat([q.flatten(1), k.flatten(1), v.flatten(1)], dim=1)
        q, k, v = (mixed[:, :H * K].view(T, H, K), mixed[:, H * K:2 * H * K].view(T, H, K),
                   mixed[:, 2 * H * K:].view(T, HV, V))

    def call(p):
        qla_serve.gdn_prefill(q, k, v, x["g"], x["beta"], state_pool=x["pool"],
                              state_indices=x["idx"], cu_seqlens=p.cu_seqlens, has_initial_state=hinit,
                              plan=p, out=out, null_slot=0, use_qk_l2norm=PACKED_L2NORM)

    def kernel():
        call(plan)
    kernel.plan = plan      # the plan's choices (V-block, CP partitions) go into the row
    kernel.out = out

    def other_walk() -> dict:
        """Same-run A/B of the walk's two forms: this row again with the other one (persistent or
        one CTA per item) at the same V-block. Rows that take CP run neither form (phase 3 walks)."""
        from qla_serve.kernels import hopper

        key = ("hopper", x["v"].shape[1], x["v"].shape[2])
        chosen = plan.kernel_data.get(key)
        if chosen is None or any(k[0] == "hopper-cp" and v is not None for k, v in plan.kernel_data.items()):
            return {}
        alt = qla_plan(x["cu_cpu"], dev)
        alt.kernel_data[key] = {"block_v": chosen["block_v"], "persistent": not chosen["persistent"]}
        fn = lambda: call(alt)      # noqa: E731
        fn(); torch.cuda.synchronize()
        got = {"qla_walk": "persistent" if chosen["persistent"] else "cta-per-item",
               "qla_other_walk": "cta-per-item" if chosen["persistent"] else "persistent",
               "qla_other_walk_ms": bench(fn)}
        got["qla_other_walk_gpu_ms"] = gpu_ms(fn)
        return got
    kernel.other_walk = other_walk

    def serving():
        # host metadata → a fresh plan every call; the host tables, their device copies and the
        # choices of this batch shape come from the caches after the first call, as in an engine
        # whose batches repeat their shapes (host_us's plan_and_call_cold times a shape never seen)
        call(qla_plan(x["cu_cpu"], dev))

    def host_us(reps: int = 20) -> dict:
        """Host (CPU) microseconds per call, GPU work left queued: building a plan, a call with a
        fresh plan, a call with the cached plan. Where these exceed the kernel time, a timing is
        the host's, not the GPU's (the serving column on short rows)."""
        from qla_serve.plan import clear_host_caches

        t = {"plan": 0.0, "call_fresh": 0.0, "call_cached": 0.0, "plan_and_call_cold": 0.0}
        torch.cuda.synchronize()
        for _ in range(reps):
            t0 = time.perf_counter()
            p = qla_plan(x["cu_cpu"], dev)
            t1 = time.perf_counter()
            call(p)
            t2 = time.perf_counter()
            call(plan)
            t3 = time.perf_counter()
            torch.cuda.synchronize()    # host timings only: do not let the queue fill up
            clear_host_caches()         # a batch shape never seen: the host tables and choices built anew
            t4 = time.perf_counter()
            call(qla_plan(x["cu_cpu"], dev))
            t5 = time.perf_counter()
            torch.cuda.synchronize()
            t["plan"] += t1 - t0
            t["call_fresh"] += t2 - t1
            t["call_cached"] += t3 - t2
            t["plan_and_call_cold"] += t5 - t4
        return {f"qla_host_{k}_us": v / reps * 1e6 for k, v in t.items()}

    kernel.host_us = host_us
    return kernel, serving


def qla_choices(plan) -> dict:
    """What the host plan chose for this row (read after a call filled ``plan.kernel_data``)."""
    got = {}
    for key, val in plan.kernel_data.items():
        if key[0] == "hopper":
            got["qla_block_v"] = val["block_v"]
        elif key[0] == "hopper-cp":
            got["qla_cp_parts"] = list(val.parts) if val is not None else None
    return got


# ---------------------------------------------------------------------------------------------- FLA

def fla_fns(x):
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    from fla.ops.utils.index import prepare_chunk_indices

    cu = x["cu_cpu"].long().cuda()
    ci = prepare_chunk_indices(cu, 64, cu_seqlens_cpu=x["cu_cpu"].long())
    h0 = x["pool"][x["idx"].long()].clone()
    q, k, v, g, b = (t.unsqueeze(0) for t in (x["q"], x["k"], x["v"], x["g"], x["beta"]))

    def kernel():
        chunk_gated_delta_rule(q, k, v, g, b, initial_state=h0, output_final_state=True, state_v_first=True,
                               cu_seqlens=cu, cu_seqlens_cpu=x["cu_cpu"].long(), chunk_indices=ci)

    def serving():
        cu_new = x["cu_cpu"].long().pin_memory().cuda(non_blocking=True)
        idx = x["idx"].long()
        init = x["pool"][idx]
        o, ht = chunk_gated_delta_rule(q, k, v, g, b, initial_state=init, output_final_state=True,
                                       state_v_first=True, cu_seqlens=cu_new)
        x["pool"][idx] = ht.to(x["pool"].dtype)
    return kernel, serving


# ---------------------------------------------------------------------------------------------- FlashQLA

def flashqla_fns(x):
    import flash_qla
    from flash_qla.ops.gated_delta_rule.chunk import _auto_intra_cp_context

    cu = x["cu_cpu"].long().cuda()
    q, k, v, g, b = (t.unsqueeze(0) for t in (x["q"], x["k"], x["v"], x["g"], x["beta"]))
    h0 = x["pool"][x["idx"].long()].clone()
    ctx = _auto_intra_cp_context(k, v, cu, 64, True, False)

    def kernel():
        flash_qla.chunk_gated_delta_rule(q, k, v, g, b, initial_state=h0, output_final_state=True,
                                         cu_seqlens=cu, state_v_first=True, cp_context=ctx)

    def serving():
        cu_new = x["cu_cpu"].long().pin_memory().cuda(non_blocking=True)
        idx = x["idx"].long()
        init = x["pool"][idx]
        o, ht = flash_qla.chunk_gated_delta_rule(q, k, v, g, b, initial_state=init, output_final_state=True,
                                                 cu_seqlens=cu_new, state_v_first=True)
        x["pool"][idx] = ht.to(x["pool"].dtype)
    return kernel, serving


# ---------------------------------------------------------------------------------------------- FlashInfer

def flashinfer_fns(x):
    from flashinfer.gdn_prefill import chunk_gated_delta_rule as fi_gdn

    cu = x["cu_cpu"].long().cuda()
    h0 = x["pool"][x["idx"].long()].clone()

    def kernel():
        fi_gdn(x["q"], x["k"], x["v"], g=torch.exp(x["g"]), beta=x["beta"], initial_state=h0,
               output_final_state=True, cu_seqlens=cu, use_qk_l2norm_in_kernel=False)

    def serving():
        cu_new = x["cu_cpu"].long().pin_memory().cuda(non_blocking=True)
        idx = x["idx"].long()
        o, ht = fi_gdn(x["q"], x["k"], x["v"], g=torch.exp(x["g"]), beta=x["beta"],
                       initial_state=x["pool"][idx], output_final_state=True, cu_seqlens=cu_new,
                       use_qk_l2norm_in_kernel=False)
        x["pool"][idx] = ht

    # FlashInfer's own routing (gdn_prefill.chunk_gated_delta_rule, use_cp="auto"): its context-parallel
    # DSL kernel where sequences × value heads fill under half the SMs and the inputs are contiguous
    from flashinfer.gdn_kernels import cp_delta_rule_dsl_sm90
    sms = torch.cuda.get_device_properties(x["q"].device).multi_processor_count
    kernel.cp = (cp_delta_rule_dsl_sm90 is not None and all(x[n].is_contiguous() for n in ("q", "k", "v"))
                 and (len(x["cu_cpu"]) - 1) * x["v"].shape[1] < max(1, sms // 2))
    return kernel, serving


BACKENDS = {"qla": qla_fns, "fla": fla_fns, "flashqla": flashqla_fns, "flashinfer": flashinfer_fns}


def agreement(x, qla_kernel) -> dict:
    """QLA's output and final states (this row's plan: its V-block, its CP split) against FLA's on
    the row's own inputs from the same initial states, relative L2: a timed row whose numbers
    disagree with the anchor is not a result. x["pool"] is restored afterwards."""
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    idx = x["idx"].long()
    pool0 = x["pool"].clone()
    q, k, v, g, b = (t.unsqueeze(0) for t in (x["q"], x["k"], x["v"], x["g"], x["beta"]))
    o_fla, ht_fla = chunk_gated_delta_rule(q, k, v, g, b, initial_state=pool0[idx].clone(), output_final_state=True,
                                           state_v_first=True, cu_seqlens=x["cu_cpu"].long().cuda())
    qla_kernel.out.fill_(float("nan"))
    qla_kernel()
    got = {"qla_vs_fla_o": rel_l2(qla_kernel.out, o_fla.reshape(qla_kernel.out.shape)),
           "qla_vs_fla_state": rel_l2(x["pool"][idx], ht_fla)}
    x["pool"].copy_(pool0)
    return got


AGREE_TOL = 1e-2    # QLA vs FLA on a row's inputs: both ~3e-3 from the fp64 recurrence (accuracy block)


# ---------------------------------------------------------------------------------------------- accuracy

def accuracy(backends=tuple(BACKENDS), seqlens=(512, 300, 77), H=2, HV=8, seed=3) -> dict:
    """Relative L2 error of o and final state vs an fp64 token recurrence (on the GPU), same inputs,
    for the run's own backends only: an anchor that was not asked for may JIT-compile for minutes
    here (session 10's A/B runs, ``--backends qla``, timed out inside FlashQLA's first compile)."""
    x = make_inputs(list(seqlens), H, HV, seed)
    # Seeded like make_inputs, so that runs of two kernel forms see the same inputs and equal digits
    # mean equal outputs (until session 55 these two draws used the global generator: an A/B of
    # bit-identical forms printed different errors).
    gen = torch.Generator(device=x["g"].device).manual_seed(seed + 1)
    x["g"] = -torch.rand(x["g"].shape, device=x["g"].device, generator=gen) * 2.0
    x["pool"].normal_(generator=gen)
    from qla_serve.reference import token_recurrence

    init = x["pool"][x["idx"].long()].transpose(-1, -2)          # pool rows [V, K] → math layout [K, V]
    o_ref, s_ref = token_recurrence(x["q"], x["k"], x["v"], x["g"], x["beta"], x["cu_cpu"].tolist(), init,
                                    scale=K ** -0.5, device=x["v"].device)
    s_ref = s_ref.transpose(-1, -2)                               # back to the pool's rows

    res = {}
    pool0 = x["pool"].clone()
    for name in backends:
        try:
            x["pool"].copy_(pool0)
            if name == "qla":
                import qla_serve
                out = torch.full_like(x["v"], float("nan"))
                plan = qla_plan(x["cu_cpu"], torch.device("cuda", torch.cuda.current_device()))
                qla_serve.gdn_prefill(x["q"], x["k"], x["v"], x["g"], x["beta"], state_pool=x["pool"],
                                      state_indices=x["idx"], cu_seqlens=plan.cu_seqlens, plan=plan, out=out,
                                      has_initial_state=torch.ones(x["N"], dtype=torch.bool, device="cuda"))
                ht = x["pool"][x["idx"].long()]
            else:
                cu_d = x["cu_cpu"].long().cuda()
                q, k, v, g, b = (t.unsqueeze(0) for t in (x["q"], x["k"], x["v"], x["g"], x["beta"]))
                h0 = x["pool"][x["idx"].long()].clone()
                if name == "fla":
                    from fla.ops.gated_delta_rule import chunk_gated_delta_rule as f
                    out, ht = f(q, k, v, g, b, initial_state=h0, output_final_state=True, state_v_first=True,
                                cu_seqlens=cu_d)
                elif name == "flashqla":
                    import flash_qla
                    out, ht = flash_qla.chunk_gated_delta_rule(q, k, v, g, b, initial_state=h0,
                                                               output_final_state=True, cu_seqlens=cu_d,
                                                               state_v_first=True)
                else:
                    from flashinfer.gdn_prefill import chunk_gated_delta_rule as fi
                    out, ht = fi(x["q"], x["k"], x["v"], g=torch.exp(x["g"]), beta=x["beta"], initial_state=h0,
                                 output_final_state=True, cu_seqlens=cu_d)
                out = out.reshape(o_ref.shape)
            res[name] = {"o_err": rel_l2(out, o_ref), "state_err": rel_l2(ht, s_ref)}
        except Exception as exc:  # noqa: BLE001
            res[name] = {"error": repr(exc)[:200]}
    return res


# ---------------------------------------------------------------------------------------------- CP sweep

CP_HEADS = [(2, 8), (4, 16), (8, 32), (16, 32)]
CP_MIXES = ["1x32768", "1x16384", "1x8192", "28672+4096", "1x4096", "1x2048"]
CP_SEQLENS = {**SEQLENS, "1x4096": [4096]}     # the short rows decide CPParams.min_seq_chunks
CP_PARTS = [1, 2, 4, 8, 16, 32]


def cp_seqlens(mix: str) -> list[int]:
    """A CP sweep row: one of CP_SEQLENS, or an ad-hoc mix (:func:`mix_seqlens`)."""
    return CP_SEQLENS[mix] if mix in CP_SEQLENS else mix_seqlens(mix)


def cp_sweep(args) -> None:
    """Time the whole QLA prefill per (heads, row, V-block, forced P); fit the CP rule's constants."""
    import qla_serve
    from concurrent.futures import ProcessPoolExecutor
    import multiprocessing as mp
    from qla_serve.kernels import hopper
    from qla_serve.kernels.hopper import cp

    t_start = time.time()
    heads = CP_HEADS
    if args.heads:
        heads = [tuple(int(t) for t in h.split("/")) for h in args.heads.split(",")]
    mixes = args.mixes.split(",") if args.mixes else CP_MIXES
    parts = [int(p) for p in args.cp_parts.split(",")]
    bvs = [int(b) for b in args.cp_block_v.split(",")] if args.cp_block_v else [None]
    dev = torch.device("cuda", torch.cuda.current_device())
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    result = {"gpu": torch.cuda.get_device_name(), "sms": sms, "versions": versions(),
              "command": " ".join([os.path.basename(sys.executable)] + sys.argv), "rows": [],
              "default_params": vars(cp.default_params()),
              "env": {k: os.environ.get(k) for k in ("TILELANG_DEFAULT_TARGET", "TILELANG_CACHE_DIR")}}
    out_json = os.path.join(args.out, "cp_sweep.json")

    def dump():
        with open(out_json, "w") as f:
            json.dump(result, f, indent=1)

    # Compile every variant first, in parallel (nvcc is single-threaded).
    builds = sorted({(H, HV, bv if bv is not None
                      else hopper.planned_block_v(cp_seqlens(m), HV, V, sms, unit_norm_keys=True))
                     for H, HV in heads for m in mixes for bv in bvs})
    t0 = time.time()
    with ProcessPoolExecutor(max_workers=min(len(builds), os.cpu_count() or 1),
                             mp_context=mp.get_context("spawn")) as ex:
        for b, exc in zip(builds, ex.map(_safe_build, builds)):
            if exc:
                print(f"[cp-sweep] build {b} failed: {exc}", flush=True)
    result["build_s"] = time.time() - t0
    print(f"[cp-sweep] built {len(builds)} variants in {result['build_s']:.1f}s", flush=True)

    old_force = os.environ.get(cp.FORCE_ENV)
    try:
        for H, HV in heads:
            for mix in mixes:
                seqlens = cp_seqlens(mix)
                x = make_inputs(seqlens, H, HV)
                pool0 = x["pool"].clone()
                hinit = torch.ones(x["N"], dtype=torch.bool, device="cuda")
                for bv in bvs:
                    # Every count's output and final states against this V-block's walk without CP
                    # (untimed; the same inputs and initial states): a sweep times only correct splits.
                    os.environ[cp.FORCE_ENV] = "1"
                    ref_plan = qla_plan(x["cu_cpu"], dev)
                    if bv is not None:
                        ref_plan.kernel_data[("hopper", HV, V)] = {"block_v": bv}
                    ref_out = torch.full_like(x["v"], float("nan"))
                    x["pool"].copy_(pool0)
                    qla_serve.gdn_prefill(x["q"], x["k"], x["v"], x["g"], x["beta"], state_pool=x["pool"],
                                          state_indices=x["idx"], cu_seqlens=ref_plan.cu_seqlens,
                                          has_initial_state=hinit, plan=ref_plan, out=ref_out, null_slot=0)
                    ref_out = ref_out.float()
                    ref_state = x["pool"].float().clone()
                    for P in parts + ["rule"]:
                        if time.time() - t_start > args.budget_s:
                            print(f"[cp-sweep] budget reached, skipping {H}/{HV} {mix} bv={bv} P={P}")
                            continue
                        if P == "rule":
                            os.environ.pop(cp.FORCE_ENV, None)
                        else:
                            os.environ[cp.FORCE_ENV] = str(P)
                        plan = qla_plan(x["cu_cpu"], dev)
                        if bv is not None:
                            plan.kernel_data[("hopper", HV, V)] = {"block_v": bv}
                        block_v = hopper.plan_hopper(plan, HV, V)["block_v"]
                        tab = cp.plan_cp(plan, HV, V, block_v, sms)
                        row = {"heads": f"{H}/{HV}", "mix": mix, "seqlens": seqlens, "block_v": block_v,
                               "forced": P, "parts": list(tab.parts) if tab else [1] * len(seqlens)}
                        row["p_longest"] = row["parts"][seqlens.index(max(seqlens))]
                        out = torch.full_like(x["v"], float("nan"))       # poisoned: unwritten rows show

                        def run(plan=plan, out=out):
                            qla_serve.gdn_prefill(x["q"], x["k"], x["v"], x["g"], x["beta"], state_pool=x["pool"],
                                                  state_indices=x["idx"], cu_seqlens=plan.cu_seqlens,
                                                  has_initial_state=hinit, plan=plan, out=out, null_slot=0)
                        try:
                            x["pool"].copy_(pool0)
                            run()
                            torch.cuda.synchronize()
                            row["out_rel_diff_vs_p1"] = rel_l2(out, ref_out)
                            row["state_rel_diff_vs_p1"] = rel_l2(x["pool"], ref_state)
                            row["ms"] = bench(run)
                            # GPU-busy time too: on a slow host the short rows are host-bound and
                            # do_bench reads the host (session 18: tail starts' torch ops, +0.4 ms)
                            row["gpu_ms"] = gpu_ms(run)
                        except Exception as exc:  # noqa: BLE001
                            row["ms"] = None
                            row["error"] = repr(exc)[:300]
                        result["rows"].append(row)
                        dump()
                        print(f"[cp-sweep] {H}/{HV} {mix} bv={block_v} P={P} parts={row['parts']}: "
                              f"{row['ms'] if row['ms'] is None else round(row['ms'], 4)} ms "
                              f"(GPU {row.get('gpu_ms') and round(row['gpu_ms'], 4)}) "
                              f"diff o/state vs P=1 {_g(row.get('out_rel_diff_vs_p1'))}/"
                              f"{_g(row.get('state_rel_diff_vs_p1'))}", flush=True)
                del x
                torch.cuda.empty_cache()
    finally:
        if old_force is None:
            os.environ.pop(cp.FORCE_ENV, None)
        else:
            os.environ[cp.FORCE_ENV] = old_force
    result["wall_s"] = time.time() - t_start
    dump()
    try:
        fit = cp.fit_all({"sms": sms, "rows": result["rows"]})
        with open(os.path.join(args.out, "cp_fit.json"), "w") as f:
            json.dump(fit, f, indent=1)
        p = fit["params"]
        print(f"[cp-sweep] fit: CPParams(target_ctas={p['target_ctas']}, min_chunks={p['min_chunks']}, "
              f"max_parts={p['max_parts']}, min_seq_chunks={p['min_seq_chunks']}, "
              f"wide_block_min_parts={p['wide_block_min_parts']}, wide_block_chunk_us={p['wide_block_chunk_us']}) "
              f"geomean slowdown {fit['geomean_slowdown']:.3f} worst {fit['worst_slowdown']:.3f}", flush=True)
    except Exception as exc:  # noqa: BLE001
        print(f"[cp-sweep] fit failed: {exc!r}", flush=True)


def _safe_build(b):
    """Process-pool entry: compile one (H, HV, V-block) variant — kkt, the walk, its CP kernels."""
    from qla_serve.kernels import hopper

    H, HV, bv = b
    try:
        hopper.build_variant(hopper.Variant(H, HV, K, V, block_v=bv))
        return None
    except Exception as exc:  # noqa: BLE001
        return repr(exc)[:300]


# ---------------------------------------------------------------------------------------------- main

def prewarm_worker(H: int, HV: int, mixes: list[str]) -> None:
    """Run FlashQLA once per length mix (no timing): its TileLang kernels land in the disk cache."""
    import flash_qla  # noqa: F401
    for mix in mixes:
        x = make_inputs(mix_seqlens(mix), H, HV)
        for fn in flashqla_fns(x):
            try:
                fn()
            except Exception as exc:  # noqa: BLE001
                print(f"[prewarm] {H}/{HV} {mix}: {exc!r}"[:200])
        torch.cuda.synchronize()


def prewarm(heads, mixes, timeout_s=240.0, jobs: int | None = None) -> float:
    """FlashQLA compiles each (H, HV, block_DV, CP) variant on first use (8-20 s each, one CPU core):
    compile them before timing anything, one worker process per (heads, length mix), at most
    ``jobs`` at once (default half the cores: QLA's prebuild runs beside it). One process per head
    config, as until session 20, compiled a config's variants one after another: 71-91 s per run of
    one head config there. Two workers may compile the same variant; TileLang's disk cache takes
    either."""
    jobs = jobs or max(1, (os.cpu_count() or 2) // 2)
    pending = [(H, HV, mix) for H, HV in heads for mix in mixes]
    running: list = []
    t0 = time.time()
    while pending or running:
        while pending and len(running) < jobs:
            H, HV, mix = pending.pop(0)
            # Each worker leads its own process group: TileLang compiles in child processes (nvcc),
            # which a kill of the worker alone left running, loading the host's cores while rows
            # were timed (session 26's table: the prewarm hit its timeout).
            running.append(subprocess.Popen([sys.executable, __file__, "--prewarm-worker", f"{H},{HV}",
                                             "--mixes", mix], start_new_session=True))
        if time.time() - t0 > timeout_s:
            for proc in running:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for proc in running:
                proc.wait()
            break
        time.sleep(0.1)
        running = [proc for proc in running if proc.poll() is None]
    return time.time() - t0


def empty_row(H, HV, mix, seqlens) -> dict:
    """A row before any backend ran: every backend's times None (the table prints a dash)."""
    row = {"heads": f"{H}/{HV}", "mix": mix, "seqlens": seqlens}
    for name in BACKENDS:
        row[f"{name}_ms"] = None
        row[f"{name}_serving_ms"] = None
    return row


def time_row(x, H, HV, mix, seqlens, usable) -> dict:
    """One row: every usable backend's kernel and serving times (do_bench medians) and GPU-busy
    time on inputs x, in this process."""
    row = empty_row(H, HV, mix, seqlens)
    for name, mk in usable.items():
        try:
            kernel, serving = mk(x)
            kernel(); serving(); torch.cuda.synchronize()     # compile / autotune outside timing
            row[f"{name}_ms"] = bench(kernel)
            row[f"{name}_serving_ms"] = bench(serving)
            try:   # host-independent GPU time; a profiler failure must not cost the row
                row[f"{name}_gpu_ms"] = gpu_ms(kernel)
            except Exception as exc:  # noqa: BLE001
                row[f"{name}_gpu_error"] = repr(exc)[:200]
            if name == "flashinfer":
                row["flashinfer_cp"] = kernel.cp
            if name == "qla":
                from qla_serve.kernels import hopper
                row.update(qla_choices(kernel.plan))
                try:   # a diagnostic: its failure must not cost the row its timings
                    row.update(kernel.host_us())
                except Exception as exc:  # noqa: BLE001
                    row["qla_host_error"] = repr(exc)[:200]
                try:
                    row.update(kernel.other_walk())
                except Exception as exc:  # noqa: BLE001
                    row["qla_other_walk_error"] = repr(exc)[:200]
                hopper._skip.add("fwd")
                try:
                    row["qla_kkt_only_ms"] = bench(kernel)
                    # kkt_solve's own GPU time (the wall time above is the host's on short rows:
                    # session 37's 2/8 rows read 0.07–0.08 ms there against 0.05 ms for whole calls);
                    # like the row's own gpu_ms, a profiler failure is noted, not the row's error
                    try:
                        row["qla_kkt_only_gpu_ms"] = gpu_ms(kernel)
                    except Exception as exc:  # noqa: BLE001
                        row["qla_kkt_only_gpu_error"] = repr(exc)[:200]
                finally:
                    hopper._skip.discard("fwd")
        except Exception as exc:  # noqa: BLE001
            row[f"{name}_error"] = repr(exc)[:200]
            print(f"[bench] {name} {H}/{HV} {mix}: {exc!r}"[:300], flush=True)
    return row


def add_ratios(row) -> None:
    fq, q = row.get("flashqla_ms"), row.get("qla_ms")
    fqs, qs = row.get("flashqla_serving_ms"), row.get("qla_serving_ms")
    row["qla_over_flashqla"] = (q / fq) if q and fq else None
    fqg, qg = row.get("flashqla_gpu_ms"), row.get("qla_gpu_ms")
    row["qla_over_flashqla_gpu"] = (qg / fqg) if qg and fqg else None
    row["flashqla_serving_over_qla_serving"] = (fqs / qs) if qs and fqs else None


def print_row(row, usable) -> None:
    print(f"[bench] {row['heads']} {row['mix']}: " + " ".join(
        f"{n}={row[f'{n}_ms']:.3f}/{row[f'{n}_serving_ms']:.3f}" for n in usable
        if row.get(f"{n}_ms") is not None and row.get(f"{n}_serving_ms") is not None)
        + (f" qla-vs-fla o/state {_g(row['qla_vs_fla_o'])}/{_g(row['qla_vs_fla_state'])}"
           if "qla_vs_fla_o" in row else ""), flush=True)


def time_isolated(args, heads, mixes, backends, t_start) -> list[dict]:
    """``--isolate``: each backend's rows timed in a process of its own (this script with
    ``--backends <one> --no-prewarm --no-accuracy --no-agreement``), one backend after another, so
    that no backend's host work is timed in a process the others' runs have slowed (see the module
    doc; a server runs one backend). Rows merged by (heads, mix); each backend gets an equal share of the budget
    left. The caller then checks agreement on every merged row in its own process."""
    parts = {}
    for i, b in enumerate(backends):
        share = (args.budget_s - (time.time() - t_start)) / (len(backends) - i)
        out = os.path.join(args.out, f"isolated-{b}")
        cmd = [sys.executable, os.path.abspath(__file__), "--backends", b, "--no-prewarm", "--no-accuracy",
               "--no-agreement", "--heads", ",".join(f"{H}/{HV}" for H, HV in heads), "--mixes", ",".join(mixes),
               "--budget-s", str(max(10.0, share - 15.0)), "--out", out]
        t0 = time.time()
        rc = subprocess.call(cmd)
        print(f"[bench] isolated {b}: rc={rc} {time.time() - t0:.1f}s", flush=True)
        try:
            parts[b] = json.load(open(os.path.join(out, "kernels.json")))["rows"]
        except (OSError, ValueError, KeyError):
            parts[b] = []
    rows = []
    for H, HV in heads:
        for mix, seqlens in mixes.items():
            row = empty_row(H, HV, mix, seqlens)
            found = False
            for b in backends:     # each backend's own fields, from its own process
                for r in parts[b]:
                    if r["heads"] == row["heads"] and r["mix"] == mix:
                        found = True
                        row.update({k: v for k, v in r.items() if k.startswith(b + "_") and v is not None})
            if found:
                rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    ap.add_argument("--quick", action="store_true", help="two head configs, four length mixes")
    ap.add_argument("--backends", default="qla,fla,flashqla,flashinfer")
    ap.add_argument("--budget-s", type=float, default=420.0, help="stop starting rows after this many seconds")
    ap.add_argument("--heads", default=None, help="e.g. 16/32,2/8 (default: all six)")
    ap.add_argument("--prewarm-worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--mixes", default=None, help="comma-separated: names of SEQLENS (1x32768, 1024x8, …) or "
                    "ad-hoc mixes such as 16384+64*16 (COUNT*LENGTH terms)")
    ap.add_argument("--no-prewarm", action="store_true")
    ap.add_argument("--isolate", action="store_true",
                    help="time each backend's rows in a process of its own (then agreement in this one)")
    ap.add_argument("--no-accuracy", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-agreement", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--cp-sweep", action="store_true", help="issue 4: time QLA per forced CP partition count, fit the rule")
    ap.add_argument("--cp-parts", default=",".join(str(p) for p in CP_PARTS))
    ap.add_argument("--cp-block-v", default=None, help="e.g. 64,128 (default: the plan's choice)")
    ap.add_argument("--merge", nargs="+", default=None, metavar="KERNELS_JSON",
                    help="combine the rows of several runs' kernels.json (e.g. one per GPU) into --out; "
                         "PATH:HEADS (16/32,2/8) takes only those head configs' rows of that run")
    args = ap.parse_args()
    if args.merge:
        merge(args.merge, args.out)
        return
    if args.cp_sweep:
        os.makedirs(args.out, exist_ok=True)
        cp_sweep(args)
        return
    if args.prewarm_worker:
        H, HV = (int(t) for t in args.prewarm_worker.split(","))
        prewarm_worker(H, HV, args.mixes.split(","))
        return
    os.makedirs(args.out, exist_ok=True)
    t_start = time.time()
    heads = HEADS[:2] if args.quick else HEADS
    if args.heads:
        heads = [tuple(int(t) for t in h.split("/")) for h in args.heads.split(",")]
    mixes = {k: SEQLENS[k] for k in (["1x8192", "8192x4", "64x128", "256x1+4096"] if args.quick else SEQLENS)}
    if args.mixes:
        mixes = {k: mix_seqlens(k) for k in args.mixes.split(",")}
    backends = [b for b in args.backends.split(",") if b]
    usable = {}
    for b in backends:
        try:
            {"qla": lambda: __import__("qla_serve.kernels.hopper"), "fla": lambda: __import__("fla"),
             "flashqla": lambda: __import__("flash_qla"), "flashinfer": lambda: __import__("flashinfer.gdn_prefill")}[b]()
            usable[b] = BACKENDS[b]
        except Exception as exc:  # noqa: BLE001
            print(f"[bench] {b} not usable: {exc!r}"[:200])
    result = {"gpu": torch.cuda.get_device_name(), "versions": versions(),
              "command": " ".join([os.path.basename(sys.executable)] + sys.argv), "rows": [],
              "env": {k: os.environ.get(k) for k in ("FLA_FLASH_QLA", "QLA_CP", "QLA_CP_PARTS", "QLA_CP_TAIL",
                                                     "QLA_CP_ANY_COUNT", "QLA_BENCH_POOL", "TILELANG_DEFAULT_TARGET",
                                                     "QLA_BENCH_INPUTS", "QLA_PERSISTENT")}}
    qla_build = None
    if "qla" in usable and not args.no_prewarm:
        # QLA's kernels (kkt, walk, CP passes, combine) for these heads, built in parallel worker
        # processes while FlashQLA prewarms: compiled lazily, one at a time, they ate a whole call.
        widths = os.environ.get("QLA_BLOCK_V") or "64,128"
        qla_build = subprocess.Popen(
            [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_prebuild.py"),
             "--no-tests", "--heads", ",".join(f"{H}/{HV}" for H, HV in heads), "--block-v", widths]
            + (["--packed-l2norm"] if PACKED_L2NORM else [])
            + (["--host-profile"] if BENCH_POOL_DTYPE == torch.bfloat16 else []),   # its bf16-pool variants
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    if "flashqla" in usable and not args.no_prewarm:
        result["flashqla_prewarm_s"] = prewarm(heads, list(mixes))
        print(f"[bench] FlashQLA prewarm {result['flashqla_prewarm_s']:.1f}s", flush=True)
    if qla_build is not None:
        rc = qla_build.wait()
        result["qla_prebuild_s"] = time.time() - t_start
        print(f"[bench] QLA kernels built (rc={rc}) {result['qla_prebuild_s']:.1f}s", flush=True)
    t0 = time.time()
    if not args.no_accuracy:
        try:
            result["accuracy"] = accuracy(tuple(usable))
        except Exception as exc:  # noqa: BLE001
            result["accuracy"] = {"error": repr(exc)[:300]}
        print("[bench] accuracy", json.dumps(result["accuracy"]), f"{time.time() - t0:.1f}s", flush=True)

    def dump():
        with open(os.path.join(args.out, "kernels.json"), "w") as f:
            json.dump(result, f, indent=1)

    if args.isolate and len(usable) > 1:
        result["isolated"] = True
        result["rows"] = time_isolated(args, heads, mixes, list(usable), t_start)
    for H, HV in heads:
        for mix, seqlens in mixes.items():
            row = None
            if result.get("isolated"):
                row = next((r for r in result["rows"] if r["heads"] == f"{H}/{HV}" and r["mix"] == mix), None)
                if row is None:
                    continue
            elif time.time() - t_start > args.budget_s:
                print(f"[bench] budget reached, skipping {H}/{HV} {mix}")
                continue
            x = make_inputs(seqlens, H, HV)
            if row is None:
                row = time_row(x, H, HV, mix, seqlens, usable)
                result["rows"].append(row)
            if "qla" in usable and "fla" in usable and row.get("qla_ms") is not None and not args.no_agreement:
                try:
                    row.update(agreement(x, usable["qla"](x)[0]))
                except Exception as exc:  # noqa: BLE001
                    row["qla_vs_fla_error"] = repr(exc)[:200]
            del x
            torch.cuda.empty_cache()
            add_ratios(row)
            dump()
            print_row(row, usable)
    result["wall_s"] = time.time() - t_start
    dump()
    write_markdown(result, os.path.join(args.out, "kernels.md"))
    try:
        plot(result, os.path.join(args.out, "kernels.png"))
    except Exception as exc:  # noqa: BLE001
        print("[bench] plot failed:", exc)
    print(open(os.path.join(args.out, "kernels.md")).read())


def merge(paths, out):
    """One table from runs split across GPUs of one host (same image, same inputs per row), or from
    runs on machines of one GPU model: ``PATH:HEADS`` (e.g. ``run/kernels.json:16/32,2/8``) takes only
    those head configs' rows of that run, so each head config can come whole from the run that timed
    it (session 57's H100 table). Each row keeps the file it came from in ``source``."""
    runs, rows = [], []
    for spec in paths:
        path, _, heads = spec.rpartition(":")
        if not re.fullmatch(r"\d+/\d+(,\d+/\d+)*", heads):      # no head selection: the whole run
            path, heads = spec, ""
        run = json.load(open(path))
        keep = set(heads.split(",")) if heads else None
        runs.append(run)
        rows += [dict(row, source=path) for row in run["rows"] if keep is None or row["heads"] in keep]
    result = dict(runs[0])
    result["command"] = " ; ".join(r["command"] for r in runs)
    result["rows"] = rows
    result["parts"] = [{k: r.get(k) for k in ("gpu", "command", "wall_s", "flashqla_prewarm_s", "qla_prebuild_s")}
                       for r in runs]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "kernels.json"), "w") as f:
        json.dump(result, f, indent=1)
    write_markdown(result, os.path.join(out, "kernels.md"))
    try:
        plot(result, os.path.join(out, "kernels.png"))
    except Exception as exc:  # noqa: BLE001
        print("[bench] plot failed:", exc)
    print(open(os.path.join(out, "kernels.md")).read())


def targets(rows) -> list[str]:
    """Issue 3's targets, counted over the rows that ran: (a) kernel ≤ 0.8× FlashQLA where N·HV ≥ 64,
    (b) serving path ≥ 3× faster than FlashQLA's."""
    wide = [r for r in rows if len(r["seqlens"]) * int(r["heads"].split("/")[1]) >= 64]
    a = [r for r in wide if r.get("qla_over_flashqla") is not None]
    ag = [r for r in wide if r.get("qla_over_flashqla_gpu") is not None]
    b = [r for r in rows if r.get("flashqla_serving_over_qla_serving") is not None]
    return [f"- (a) QLA ≤ 0.8× FlashQLA (kernel) on rows with N·HV ≥ 64: "
            f"{sum(r['qla_over_flashqla'] <= 0.8 for r in a)} of {len(a)}; on GPU-busy time: "
            f"{sum(r['qla_over_flashqla_gpu'] <= 0.8 for r in ag)} of {len(ag)}",
            f"- (b) QLA serving ≥ 3× faster than FlashQLA serving: "
            f"{sum(r['flashqla_serving_over_qla_serving'] >= 3.0 for r in b)} of {len(b)}"]


def _f(x):
    return "—" if x is None else f"{x:.3f}"


def agreement_lines(rows) -> list[str]:
    """The per-row QLA-vs-FLA check for the markdown: the worst row, and every row over AGREE_TOL."""
    checked = [r for r in rows if r.get("qla_vs_fla_o") is not None]
    if not checked:
        return []
    def err(r):       # NaN (an unwritten, poisoned output) counts as the worst
        e = max(r["qla_vs_fla_o"], r["qla_vs_fla_state"])
        return e if r["qla_vs_fla_o"] == r["qla_vs_fla_o"] and r["qla_vs_fla_state"] == r["qla_vs_fla_state"] \
            else float("inf")
    worst = max(checked, key=err)
    bad = [r for r in checked if err(r) > AGREE_TOL]
    out = ["", f"QLA vs FLA on every row's own inputs (relative L2, same initial states): {len(checked)} rows, "
               f"worst {worst['heads']} {worst['mix']} o {_g(worst['qla_vs_fla_o'])} / state "
               f"{_g(worst['qla_vs_fla_state'])}; over {AGREE_TOL:g}: {len(bad)}"]
    out += [f"- DISAGREE {r['heads']} {r['mix']}: o {_g(r['qla_vs_fla_o'])}, state {_g(r['qla_vs_fla_state'])}"
            for r in bad]
    return out


def write_markdown(result, path):
    lines = [f"GPU: {result['gpu']}  ", f"versions: {json.dumps(result['versions'])}  ",
             f"command: `{result['command']}`  ", "ms, do_bench median. kernel = cached metadata; serving = fresh "
             "cu_seqlens + states in a pool (others gather/scatter).", "",
             "QLA/FlashQLA GPU = the same ratio on GPU-busy time (profiler; no host gaps).", "",
             "| heads | seqlens | QLA | FLA | FlashQLA | FlashInfer | QLA/FlashQLA | QLA/FlashQLA GPU | QLA/FlashInfer | "
             "QLA serving | FLA serving | FlashQLA serving | FlashInfer serving | FlashQLA serving / QLA serving |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        q, fi = r.get("qla_ms"), r.get("flashinfer_ms")
        lines.append("| " + " | ".join([r["heads"], r["mix"], _f(r["qla_ms"]), _f(r["fla_ms"]), _f(r["flashqla_ms"]),
                                         _f(r["flashinfer_ms"]), _f(r["qla_over_flashqla"]),
                                         _f(r.get("qla_over_flashqla_gpu")),
                                         _f(q / fi if q and fi else None), _f(r["qla_serving_ms"]),
                                         _f(r["fla_serving_ms"]), _f(r["flashqla_serving_ms"]),
                                         _f(r["flashinfer_serving_ms"]),
                                         _f(r["flashqla_serving_over_qla_serving"])]) + " |")
    lines += ["", "Targets (issue 3), over the rows above:", ""] + targets(result["rows"])
    fi_rows = [r for r in result["rows"] if r.get("flashinfer_gpu_ms") is not None]
    if fi_rows:
        lines += ["", "QLA against FlashInfer on GPU-busy time (profiler; no host gaps). FlashInfer CP = its "
                  "context-parallel kernel took the row (its own routing):", "",
                  "| heads | seqlens | QLA GPU | FlashInfer GPU | QLA / FlashInfer GPU | FlashInfer CP |",
                  "|---|---|---|---|---|---|"]
        for r in fi_rows:
            qg, fg = r.get("qla_gpu_ms"), r["flashinfer_gpu_ms"]
            lines.append("| " + " | ".join([r["heads"], r["mix"], _f(qg), _f(fg), _f(qg / fg if qg and fg else None),
                                             str(r.get("flashinfer_cp"))]) + " |")
    ab = [r for r in result["rows"] if r.get("qla_other_walk_ms") is not None]
    if ab:
        lines += ["", "QLA's walk in its two forms, same run, same V-block (rows without CP); GPU = GPU-busy ms:", "",
                  "| heads | seqlens | V-block | walk | ms | GPU | other walk | ms | GPU | GPU ratio (walk / other) |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in ab:
            g, og = r.get("qla_gpu_ms"), r.get("qla_other_walk_gpu_ms")
            lines.append("| " + " | ".join([r["heads"], r["mix"], str(r.get("qla_block_v")), r["qla_walk"],
                                             _f(r["qla_ms"]), _f(g), r["qla_other_walk"], _f(r["qla_other_walk_ms"]),
                                             _f(og), _f(g / og if g and og else None)]) + " |")
    lines += agreement_lines(result["rows"])
    acc = result.get("accuracy", {})
    lines += ["", "Accuracy vs fp64 token recurrence (H/HV 2/8, seqlens 512+300+77, gates U(−2, 0)):", ""]
    for n, a in acc.items():
        lines.append(f"- {n}: {json.dumps(a)}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def plot(result, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = result["rows"]
    labels = [f"{r['heads']}\n{r['mix']}" for r in rows]
    fig, axes = plt.subplots(2, 1, figsize=(max(12, len(rows) * 0.45), 9))
    for ax, suffix, title in ((axes[0], "_ms", "kernel (cached metadata)"),
                              (axes[1], "_serving_ms", "serving path (fresh metadata, pooled states)")):
        w = 0.2
        for j, name in enumerate(("qla", "fla", "flashqla", "flashinfer")):
            vals = [r.get(name + suffix) or 0.0 for r in rows]
            if any(vals):
                ax.bar([i + (j - 1.5) * w for i in range(len(rows))], vals, w, label=name)
        ax.set_yscale("log")
        ax.set_ylabel("ms")
        ax.set_title(title)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels(labels, fontsize=6, rotation=90)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
