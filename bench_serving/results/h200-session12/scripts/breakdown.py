"""Per-kernel GPU time (torch profiler, mean µs per call) of QLA's and FlashQLA's prefill on the
same inputs (kernels.make_inputs). Session 12: how much of FlashQLA's call is its kkt_solve.
    python breakdown.py OUT.json [heads:mix ...]"""
import collections, json, sys
import torch
sys.path.insert(0, "bench_serving")
import kernels as kb
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

def per_kernel(fn, reps=10):
    fn(); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    acc = collections.defaultdict(float)
    for e in prof.events():
        if e.device_type == DeviceType.CUDA and "Synchronize" not in e.name:
            acc[e.name[:60]] += (e.time_range.end - e.time_range.start) / reps
    return dict(sorted(acc.items(), key=lambda kv: -kv[1]))

out, rows = sys.argv[1], []
for spec in sys.argv[2:] or ["16/32:8192x4", "16/32:1x32768", "2/8:1x32768"]:
    heads, mix = spec.split(":")
    H, HV = map(int, heads.split("/"))
    n, _, L = mix.partition("x")
    seqlens = [int(L)] * int(n) if L else [int(s) for s in mix.split("+")]
    x = kb.make_inputs(seqlens, H, HV)
    row = {"heads": heads, "mix": mix}
    for name, fns in (("qla", kb.qla_fns), ("flashqla", kb.flashqla_fns)):
        try:
            row[name] = per_kernel(fns(x)[0])
        except Exception as exc:  # noqa: BLE001
            row[name + "_error"] = repr(exc)[:300]
    print(json.dumps(row), flush=True)
    rows.append(row)
json.dump(rows, open(out, "w"), indent=1)
