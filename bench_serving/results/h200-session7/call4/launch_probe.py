"""Session 7 probe: where a TileLang launch's ~40 µs of host time goes on the H200's host, and a
cProfile of whole CP calls. Prints JSON lines."""
import cProfile, json, pstats, io, sys, time
import torch, tvm_ffi
import qla_serve
from qla_serve import plan_prefill
from qla_serve.kernels import hopper

def best_us(fn, n=50):
    fn(); torch.cuda.synchronize(); best = 1e9
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(n): fn()
        best = min(best, (time.perf_counter() - t0) / n * 1e6); torch.cuda.synchronize()
    return round(best, 2)

print(json.dumps({"torch": torch.__version__, "tvm_ffi": getattr(tvm_ffi, "__version__", "?"),
                  "exchange_api": hasattr(torch.Tensor, "__dlpack_c_exchange_api__"),
                  "legacy_api": hasattr(torch.Tensor, "__c_dlpack_exchange_api__")}), flush=True)
dev = torch.device("cuda", 0)
x = torch.randn(1024, device=dev)
print(json.dumps({"empty": best_us(lambda: torch.empty(1024, device=dev)), "add_": best_us(lambda: x.add_(1)),
                  "stream": best_us(lambda: torch.cuda.current_stream()),
                  "from_dlpack": best_us(lambda: tvm_ffi.from_dlpack(x))}), flush=True)
for H, HV, lens in [(2, 8, [512] * 16), (2, 8, [8192])]:
    T_ = sum(lens); cu = [0]
    for s in lens: cu.append(cu[-1] + s)
    q = torch.nn.functional.normalize(torch.randn(T_, H, 128, device=dev), dim=-1).bfloat16()
    k = torch.nn.functional.normalize(torch.randn(T_, H, 128, device=dev), dim=-1).bfloat16()
    v = torch.randn(T_, HV, 128, device=dev).bfloat16(); g = -torch.rand(T_, HV, device=dev)
    beta = torch.rand(T_, HV, device=dev); out = torch.empty_like(v)
    pool = torch.randn(len(lens) + 1, HV, 128, 128, device=dev)
    idx = torch.arange(1, len(lens) + 1, dtype=torch.int32, device=dev)
    hinit = torch.ones(len(lens), dtype=torch.bool, device=dev)
    cu_cpu = torch.tensor(cu, dtype=torch.int32)
    plan = plan_prefill(cu_cpu, device=dev)
    call = lambda p=plan: qla_serve.gdn_prefill(q, k, v, g, beta, state_pool=pool, state_indices=idx,
                                                 cu_seqlens=p.cu_seqlens, has_initial_state=hinit, plan=p,
                                                 out=out, null_slot=0)
    call(); torch.cuda.synchronize()
    rec = {}
    for key, kern in list(hopper._kernels.items()):
        if not hasattr(kern, "_launch"): continue
        def wrap(f, key=key, kern=kern):
            def r(*a):
                rec.setdefault(key[0] + str(key[-1] if key[0] == "fwd" else ""), (kern, a)); return f(*a)
            return r
        kern._launch = wrap(kern._launch)
    call(); torch.cuda.synchronize()
    row = {"lens": f"{len(lens)}x{lens[0]}", "heads": f"{H}/{HV}", "call": best_us(call),
           "plan": best_us(lambda: plan_prefill(cu_cpu, device=dev)),
           "serving_host": best_us(lambda: call(plan_prefill(cu_cpu, device=dev)))}
    for name, (kern, a) in rec.items():
        conv = [tvm_ffi.from_dlpack(t) if isinstance(t, torch.Tensor) else t for t in a]
        row[name] = {"direct": best_us(lambda: kern.direct(*a)) if kern.direct else None,
                     "wrapper": best_us(lambda: kern.kernel(*a)),
                     "preconverted": best_us(lambda: kern.direct(*conv)) if kern.direct else None,
                     "nargs": len(a)}
    print(json.dumps(row), flush=True)
    pr = cProfile.Profile(); pr.enable()
    for _ in range(200): call(plan_prefill(cu_cpu, device=dev))
    pr.disable(); torch.cuda.synchronize()
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(30); print(s.getvalue()[:6000])
