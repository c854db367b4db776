"""Where a qla-serve prefill call spends its host (CPU) time: planning, the op's validation and
dispatch, the Hopper path's own glue, and each kernel launch.

    python bench_serving/host_profile.py [--heads 16/32,2/8] [--mixes 1x8192,8192x4,16x512]

Every figure is host microseconds per call (best of 7 repeats of N calls; the GPU queue is drained
between repeats, never inside one). Parts:
  plan        plan_prefill from host cu_seqlens (tables and their device copies; both kept per batch
              shape since session 37, so a repeated shape's plan copies nothing)
  stage       one staged host→device copy of the plan's tables (qla_serve.plan.stage_int32: a pinned
              buffer on CUDA), what a shape's first plan pays, and its CP tables once more
  cp_tables   the CP partition tables for that plan (0 where the plan does not split)
  prepare     the Hopper path's whole plan-only work on a fresh plan (variant choice + CP tables:
              hopper.prepare_plan), what an engine's plan_prefill(num_v_heads=...) adds once per step
  api         gdn_prefill's validation and backend choice, the backend stubbed out
  glue        the Hopper path with every kernel stubbed (variant lookup, buffers, CP orchestration)
  call        a whole call on the cached plan, kernels launched
  launches    call − api − glue: what the TileLang launches cost on the host
  fresh       plan + a whole call on it, built anew each call: what a serving step pays
  *_cold      plan / prepare / fresh with the host caches emptied before each call
              (qla_serve.plan.clear_host_caches): a batch shape seen for the first time. The
              others are what a repeated shape pays (the host tables, their device copies and
              the choices are kept per batch shape; the cold figures copy the tables anew)
On a machine without an sm_90 GPU (or with --stub) the kernels are always stubbed and `call` and
`launches` are left out: the CPU parts alone, on CPU tensors.

``--cprofile DIR`` (GPU only) also writes, per row, cProfile's top functions (by own time, µs per
call) over ``--calls`` fresh calls and over as many calls on the cached plan: where the host time
goes function by function, TileLang launches included (hopper's ``CompiledKernel.__call__``).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time

import torch

import qla_serve
from qla_serve import dispatch, plan_prefill
from qla_serve.plan import clear_host_caches, stage_int32
from qla_serve.kernels import hopper
from qla_serve.kernels.hopper import cp

K = V = 128
SEQLENS = {"1x32768": [32768], "1x8192": [8192], "8192x4": [8192] * 4, "1024x8": [1024] * 8,
           "16x512": [512] * 16, "256x1+4096": [1] * 256 + [4096], "28672+4096": [28672, 4096],
           "1x16384": [16384], "16384+16384": [16384] * 2, "64x128": [128] * 64}


def best_us(fn, n: int, sync, digits: int = 1) -> float:
    """Host µs per call of fn: best of 7 repeats of n calls, the GPU queue drained (``sync``) between
    repeats, never inside one."""
    fn()
    sync()
    best = float("inf")
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
        sync()
    return round(best, digits)


class _StubBackend:
    name = "stub"

    def why_not(self, op, call):
        return None

    def run(self, op, call):
        pass


def write_cprofile(fn, n: int, sync, path: str) -> None:
    """cProfile's view of n calls of fn (the GPU queue drained before and after): the 40 functions
    with the most own time, in µs per call of fn (pstats' own table rounds to milliseconds)."""
    fn()
    sync()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        fn()
    prof.disable()
    sync()
    stats = pstats.Stats(prof).stats        # (file, line, name) → (calls, ncalls, own s, cum s, callers)
    top = sorted(stats.items(), key=lambda kv: -kv[1][2])[:40]
    lines = [f"{n} calls; µs per call of the profiled function (cProfile's own overhead included)",
             f"{'calls':>7} {'own µs':>9} {'cum µs':>9}  function"]
    for (file, line, name), (_, ncalls, own, cum, _) in top:
        where = name if file == "~" else f"{os.path.relpath(file) if file.startswith('/') else file}:{line}({name})"
        lines.append(f"{ncalls / n:7.1f} {own / n * 1e6:9.1f} {cum / n * 1e6:9.1f}  {where}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def profile(H: int, HV: int, seqlens: list[int], dev: torch.device, stub: bool, n: int,
            cprofile_dir: str | None = None, tag: str = "", unit_norm_keys: bool = False) -> dict:
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    T_, N = sum(seqlens), len(seqlens)
    cu = [0]
    for s in seqlens:
        cu.append(cu[-1] + s)
    cu_cpu = torch.tensor(cu, dtype=torch.int32)
    bf = dict(dtype=torch.bfloat16, device=dev)
    q = torch.nn.functional.normalize(torch.randn(T_, H, K, device=dev), dim=-1).to(torch.bfloat16)
    k = torch.nn.functional.normalize(torch.randn(T_, H, K, device=dev), dim=-1).to(torch.bfloat16)
    v = torch.randn(T_, HV, V, **bf)
    g = -torch.rand(T_, HV, device=dev)
    beta = torch.rand(T_, HV, device=dev)
    out = torch.empty(T_, HV, V, **bf)
    pool = torch.randn(N + 1, HV, V, K, **bf)
    idx = torch.arange(1, N + 1, dtype=torch.int32, device=dev)
    hinit = torch.ones(N, dtype=torch.bool, device=dev)
    new_plan = lambda: plan_prefill(cu_cpu, device=dev, unit_norm_keys=unit_norm_keys)  # noqa: E731
    plan = new_plan()
    args = dict(state_pool=pool, state_indices=idx, cu_seqlens=plan.cu_seqlens, plan=plan, out=out,
                has_initial_state=hinit)

    def call():
        qla_serve.gdn_prefill(q, k, v, g, beta, **args)

    row = {"heads": f"{H}/{HV}"}
    row["plan"] = best_us(new_plan, n, sync)
    row["plan_cold"] = best_us(lambda: (clear_host_caches(), new_plan()), n, sync)
    row["cp_tables"] = best_us(lambda: cp.plan_cp(new_plan(), HV, V, hopper.plan_hopper(plan, HV, V)["block_v"]),
                               n, sync)
    row["cp_tables"] = round(row["cp_tables"] - row["plan"], 1)
    row["prepare"] = round(best_us(lambda: hopper.prepare_plan(new_plan(), HV, V), n, sync) - row["plan"], 1)
    row["prepare_cold"] = round(best_us(lambda: (clear_host_caches(), hopper.prepare_plan(new_plan(), HV, V)), n, sync)
                                - row["plan_cold"], 1)
    tables = [plan.cu_seqlens_cpu.numpy(), plan.chunk_offsets_cpu.numpy(), plan.chunk_bounds.cpu().numpy(),
              plan.seq_order.cpu().numpy()]
    row["stage"] = best_us(lambda: stage_int32(tables, dev), n, sync)
    saved = dispatch.BACKENDS
    dispatch.BACKENDS = [_StubBackend()]
    try:
        row["api"] = best_us(call, n, sync)
    finally:
        dispatch.BACKENDS = saved
    if not stub:
        call()                              # kernels loaded and the plan's tables cached first
        row["call"] = best_us(call, n, sync)

        def fresh():
            p = new_plan()
            qla_serve.gdn_prefill(q, k, v, g, beta, **{**args, "plan": p, "cu_seqlens": p.cu_seqlens})

        row["fresh"] = best_us(fresh, n, sync)
        row["fresh_cold"] = best_us(lambda: (clear_host_caches(), fresh()), n, sync)
        if cprofile_dir:
            write_cprofile(fresh, n, sync, os.path.join(cprofile_dir, f"cprof-{tag}-fresh.txt"))
            write_cprofile(call, n, sync, os.path.join(cprofile_dir, f"cprof-{tag}-cached.txt"))
    noop = lambda *a, **kw: None  # noqa: E731
    patched = {"kkt_kernel_for": lambda var, heads_per_cta=None: noop, "fwd_kernel": lambda var, phase=0, persistent=None, tail_start=False: noop}
    saved_h = {name: getattr(hopper, name) for name in patched}
    saved_cp = cp.phase_kernels, cp.combine_kernel, cp.tail_scan_kernel
    for name, fn in patched.items():
        setattr(hopper, name, fn)
    cp.phase_kernels = lambda var, tail=False: (noop, noop)
    cp.combine_kernel = lambda *a, **kw: noop
    cp.tail_scan_kernel = lambda HV: noop
    try:
        row["glue"] = best_us(lambda: hopper.gdn_prefill_hopper(
            q, k, v, g, beta, state_pool=pool, state_indices=idx, has_initial_state=hinit, plan=plan,
            scale=K ** -0.5, use_qk_l2norm=False, out=out, state_layout="vk", null_slot=0), n, sync)
    finally:
        for name, fn in saved_h.items():
            setattr(hopper, name, fn)
        cp.phase_kernels, cp.combine_kernel, cp.tail_scan_kernel = saved_cp
    if "call" in row:
        row["launches"] = round(row["call"] - row["api"] - row["glue"], 1)
    choice = plan.kernel_data.get(("hopper", HV, V)) or {}
    cp_key = next((key for key in plan.kernel_data if key[0] == "hopper-cp"), None)
    tables = plan.kernel_data.get(cp_key) if cp_key else None
    row["block_v"] = choice.get("block_v")
    row["cp_parts"] = list(tables.parts) if tables is not None else None
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heads", default="16/32,2/8")
    ap.add_argument("--mixes", default="1x32768,1x8192,8192x4,16x512,256x1+4096")
    ap.add_argument("--calls", type=int, default=50, help="calls per timed repeat")
    ap.add_argument("--stub", action="store_true", help="stub the kernels even on a GPU")
    ap.add_argument("--out", help="write the rows as JSON here")
    ap.add_argument("--unit-norm-keys", action="store_true",
                    help="plans declare unit-norm keys (CP tail starts), as kernel_bench.py's do")
    ap.add_argument("--cprofile", metavar="DIR", help="also write cProfile's top functions per row here (GPU)")
    ap.add_argument("--before", default="", metavar="STEPS",
                    help="comma list run once before the rows, to see what slows a process's host work: "
                         "'anchors' imports FLA and FlashQLA (as kernel_bench.py does), 'profiler' runs one torch "
                         "profiler session (kernel_bench.py's GPU-busy timing), 'gc-freeze' freezes the heap "
                         "(session 28: the table process's host took 2-5x this script's on the same calls)")
    args = ap.parse_args(argv)
    gpu = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
    dev = torch.device("cuda", torch.cuda.current_device()) if gpu else torch.device("cpu")
    for step in filter(None, args.before.split(",")):
        if step == "anchors":
            import fla.ops.gated_delta_rule  # noqa: F401
            import flash_qla  # noqa: F401
        elif step == "profiler":
            from torch.profiler import ProfilerActivity, profile as torch_profile
            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
            with torch_profile(activities=acts):
                torch.ones(4, device=dev).add_(1)
                if gpu:
                    torch.cuda.synchronize()
        elif step == "gc-freeze":
            import gc
            gc.collect()
            gc.freeze()
        else:
            raise ValueError(f"--before: unknown step {step!r} (anchors, profiler, gc-freeze)")
    stub = args.stub or not gpu
    rows = []
    for hv in args.heads.split(","):
        H, HV = (int(x) for x in hv.split("/"))
        for mix in args.mixes.split(","):
            if args.cprofile:
                os.makedirs(args.cprofile, exist_ok=True)
            row = {"mix": mix, **profile(H, HV, SEQLENS[mix], dev, stub, args.calls, args.cprofile,
                                         f"{H}-{HV}-{mix}", args.unit_norm_keys)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name() if gpu else "cpu", "stubbed": stub,
                       "unit_norm_keys": args.unit_norm_keys, "torch": torch.__version__,
                       # TVM-FFI converts torch tensors through this C API when torch has it (else a
                       # slower DLPack path per tensor argument of every launch)
                       "dlpack_c_exchange_api": hasattr(torch.Tensor, "__dlpack_c_exchange_api__"),
                       "before": args.before, "command": " ".join(sys.argv), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
