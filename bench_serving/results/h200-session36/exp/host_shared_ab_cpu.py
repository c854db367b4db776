# CPU-machine A/B (session 36) of exp/shared-device-tables.patch, applied: a fresh plan + hopper.plan_hopper + cp.plan_cp on
# device="cpu", interleaved rounds, "copy" swaps shared_to for to. Run: .venv/bin/python <this file>
import time, torch, statistics
import qla_serve
from qla_serve.plan import StagedInt32
from qla_serve.kernels import hopper
from qla_serve.kernels.hopper import cp
shared = StagedInt32.shared_to
def one(cu, HV):
    p = qla_serve.plan_prefill(cu, device="cpu", unit_norm_keys=True)
    c = hopper.plan_hopper(p, HV, 128)
    cp.plan_cp(p, HV, 128, c["block_v"], sms=132)
    return p
for cuv, HV in (([0, 16384], 8), ([0, 8192], 64), ([0] + [1024 * i for i in range(1, 9)], 8), ([0, 32768], 32)):
    cu = torch.tensor(cuv, dtype=torch.int32)
    res = {"copy": [], "shared": []}
    for r in range(20):
        for label in ("copy", "shared"):
            StagedInt32.shared_to = shared if label == "shared" else (lambda self, d: self.to(d))
            for _ in range(50): one(cu, HV)
            t = time.perf_counter(); n = 300
            for _ in range(n): one(cu, HV)
            res[label].append((time.perf_counter() - t) / n * 1e6)
    a, b = statistics.median(res["copy"]), statistics.median(res["shared"])
    print(f"{len(cuv)-1}x{max(cuv)} HV {HV}: copy {a:.1f} us, shared {b:.1f} us, x{b/a:.2f}")
