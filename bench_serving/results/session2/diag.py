"""Lead's GPU diagnosis: which kernel hangs (kkt v2 / old kkt / fused), per-kernel timing."""
import importlib.util, json, os, sys, time
import torch
sys.path.insert(0, "tests")
mode, impl = sys.argv[1], sys.argv[2]
if impl == "old":
    spec = importlib.util.spec_from_file_location("qla_serve.kernels.hopper.kkt_solve", ".tlcache/kkt_solve_committed.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    sys.modules["qla_serve.kernels.hopper.kkt_solve"] = m
import test_hopper_gpu as tg
from qla_serve.kernels import hopper
def say(**kw):
    kw.update(mode=mode, impl=impl, t=round(time.time() - T0, 2)); print(json.dumps(kw), flush=True)
T0 = time.time()
def one(seqlens, H, HV, bv, seed, **kw):
    case = tg.make_case(seqlens, H, HV, seed=seed, **kw)
    pool0 = case["pool"].cpu().clone()
    hopper._skip.add("fwd"); tg.run_qla(case, block_v=bv); torch.cuda.synchronize(); say(step="kkt-done", seed=seed)
    hopper._skip.clear(); case["pool"].copy_(pool0.to(case["pool"].device))
    out = tg.run_qla(case, block_v=bv); torch.cuda.synchronize(); say(step="fwd-done", seed=seed)
    (o_ref, s_ref), cu = tg.oracle(case, pool0)
    live = [i for i, s in enumerate(case["idx"]) if s >= 0 and s != case["null_slot"]]
    rows = torch.cat([torch.arange(cu[i], cu[i + 1]) for i in live])
    fin = tg.pool_to_kv(case["pool"][[case["idx"][i] for i in live]].double().cpu(), case["layout"])
    say(step="err", o=tg.rel(out.cpu()[rows], o_ref[rows]), s=tg.rel(fin, s_ref[live]), nan=int(torch.isnan(out).sum()))
if mode == "gva1":
    one(tg.SHORT, 1, 1, 128, 1, gmax=30.0, packed=True, extra=7)
elif mode == "graph":
    for seed in range(5):
        one([100, 64, 1, 513], 2, 4, None, seed, gmax=2.0)
elif mode == "short-kv":
    one(tg.SHORT, 2, 4, 64, 3, gmax=3.0, pool_dtype=torch.bfloat16, layout="kv")
elif mode == "speed":
    from triton.testing import do_bench
    import qla_serve
    K = V = 128
    for H, HV, lens in [(16, 32, [32768]), (2, 8, [32768]), (16, 32, [8192] * 4), (16, 32, [512] * 16), (16, 32, [8192]), (2, 8, [8192])]:
        T, N = sum(lens), len(lens)
        q = torch.nn.functional.normalize(torch.randn(T, H, K, device="cuda"), dim=-1).bfloat16()
        k = torch.nn.functional.normalize(torch.randn(T, H, K, device="cuda"), dim=-1).bfloat16()
        v = torch.randn(T, HV, V, device="cuda").bfloat16()
        g = torch.nn.functional.logsigmoid(torch.randn(T, HV, device="cuda") + 2.0)
        beta = torch.rand(T, HV, device="cuda")
        pool = torch.randn(N + 1, HV, V, K, device="cuda") * 0.1
        idx = torch.arange(1, N + 1, dtype=torch.int32, device="cuda")
        cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32)
        hinit = torch.ones(N, dtype=torch.bool, device="cuda")
        out = torch.empty_like(v)
        res = {}
        for cp in ("0", "1"):
            os.environ["QLA_CP"] = cp
            plan = qla_serve.plan_prefill(cu, device=torch.device("cuda", 0))
            f = lambda: qla_serve.gdn_prefill(q, k, v, g, beta, state_pool=pool, state_indices=idx, cu_seqlens=plan.cu_seqlens,
                                              has_initial_state=hinit, plan=plan, out=out, null_slot=0)
            f(); torch.cuda.synchronize()
            res[f"cp{cp}_ms"] = do_bench(f, warmup=3, rep=20, return_mode="median")
            res[f"cp{cp}_kd"] = {str(k_): v_ for k_, v_ in plan.kernel_data.items() if "hopper" in str(k_)}
        hopper._skip.add("fwd"); plan = qla_serve.plan_prefill(cu, device=torch.device("cuda", 0))
        res["kkt_ms"] = do_bench(f, warmup=3, rep=20, return_mode="median"); hopper._skip.clear()
        say(step="speed", heads=f"{H}/{HV}", lens=f"{len(lens)}x{lens[0]}", **{k_: (round(v_, 4) if isinstance(v_, float) else str(v_)) for k_, v_ in res.items()})
