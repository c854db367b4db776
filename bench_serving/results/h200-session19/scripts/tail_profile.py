"""Session 19: CP with tail starts (QLA_CP_TAIL=1; w from cp_tail.py's one launch) against exact CP, per call, in
the sweep. Per (heads, row, P, mode): do_bench wall ms, then 10 calls under torch's profiler:
every CUDA kernel's mean time and count, and the CPU ops' self time."""
import os
import sys
import torch

sys.path.insert(0, "bench_serving")
import kernels as kb  # noqa: E402
import qla_serve  # noqa: E402
from qla_serve.kernels.hopper import cp  # noqa: E402

dev = torch.device("cuda", 0)
for H, HV, mix, Ps in ((2, 8, "1x32768", (8, 16)), (2, 8, "1x8192", (4,)), (16, 32, "1x32768", (4, 8))):
    if True:
        x = kb.make_inputs(kb.SEQLENS[mix], H, HV)
        pool0 = x["pool"].clone()
        hinit = torch.ones(x["N"], dtype=torch.bool, device="cuda")
        for P in Ps:
            for mode in ("exact", "tail"):
                os.environ[cp.TAIL_ENV] = "1" if mode == "tail" else "0"
                os.environ[cp.FORCE_ENV] = str(P)
                plan = qla_serve.plan_prefill(x["cu_cpu"], device=dev)
                out = torch.empty_like(x["v"])

                def run():
                    qla_serve.gdn_prefill(x["q"], x["k"], x["v"], x["g"], x["beta"], state_pool=x["pool"],
                                          state_indices=x["idx"], cu_seqlens=plan.cu_seqlens,
                                          has_initial_state=hinit, plan=plan, out=out, null_slot=0)
                x["pool"].copy_(pool0)
                run()
                torch.cuda.synchronize()
                ms = kb.bench(run)
                tab = [v for k, v in plan.kernel_data.items() if isinstance(k, tuple) and k and k[0] == "hopper-cp"]
                w = None
                if tab and tab[0] is not None and tab[0].tail_ends is not None:
                    # the w the kernel got: re-run tail_chunks on this call's gcum is not reachable here;
                    # report the tables' shape instead
                    T_ = x["g"].shape[0]
                    gc = x["g"].float().view(T_ // 64, 64, -1).cumsum(1).view(T_, -1)   # one sequence, whole chunks
                    w = cp.tail_chunks(gc, tab[0]).tolist()
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                        torch.profiler.ProfilerActivity.CUDA]) as prof:
                    for _ in range(10):
                        run()
                    torch.cuda.synchronize()
                print(f"\n=== {H}/{HV} {mix} P={P} {mode}: do_bench {ms:.4f} ms; w per partition and head {w}", flush=True)
                print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=12, max_name_column_width=60))
                print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10, max_name_column_width=60))
        del x
        torch.cuda.empty_cache()
