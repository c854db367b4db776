import time, torch, numpy as np
from qla_serve import plan as pm
dev = torch.device("cuda", 0)
def best(fn, n=200):
    fn(); torch.cuda.synchronize(); b = 1e9
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n): fn()
        b = min(b, (time.perf_counter() - t0) / n * 1e6); torch.cuda.synchronize()
    return round(b, 1)
t = [np.arange(17, dtype=np.int32), np.arange(17, dtype=np.int32), np.arange(256, dtype=np.int32)]
pinned = torch.empty(4096, dtype=torch.int32, pin_memory=True)
ev = torch.cuda.Event(); ev.record()
import os
r = {}
os.environ[pm.RING_ENV] = "0"; r["stage_slow"] = best(lambda: pm.stage_int32(t, dev))
os.environ[pm.RING_ENV] = "1"; r["stage_ring"] = best(lambda: pm.stage_int32(t, dev))
r["pinned_empty"] = best(lambda: torch.empty(300, dtype=torch.int32, pin_memory=True))
r["view_to"] = best(lambda: pinned[:300].to(dev, non_blocking=True))
r["whole_to"] = best(lambda: pinned.to(dev, non_blocking=True))
r["is_pinned_view"] = pinned[:300].is_pinned()
r["ev_record"] = best(lambda: ev.record())
r["ev_sync"] = best(lambda: ev.synchronize())
r["capturing"] = best(lambda: torch.cuda.is_current_stream_capturing())
r["cur_stream"] = best(lambda: torch.cuda.current_stream(dev))
print(r)
