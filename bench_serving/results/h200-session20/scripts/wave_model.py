"""Session 20, CPU only: does a list-scheduling model of the CP walk (one CTA per SM, CTAs taken in
grid order, each item `fixed + chunks * per_chunk` µs from hopper.WALK_COST_US) explain session 19's
tail-start sweep, and what does it predict for partition counts that are no power of two?

    python bench_serving/results/h200-session20/scripts/wave_model.py

Per (heads, row, V-block) the model's walk time plus one offset (the median of measured GPU-busy
time minus model over P >= 2: kkt_solve, phase 1, the combine) is compared with the measured time.
"""
import heapq
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
from qla_serve.kernels.hopper import WALK_COST_US, cp  # noqa: E402

SWEEP = ROOT / "bench_serving/results/h200-session19/cp/cp-tail/cp_sweep.json"


def walk_us(seqlens, parts, HV, block_v, sms=132):
    fixed, per_chunk = WALK_COST_US[block_v]
    items = []
    for n, P in zip(seqlens, parts):             # grid (V-block, head, virtual sequence), x fastest
        base, extra = divmod((n + 63) // 64, P)
        for p in range(P):
            items += [fixed + (base + (p < extra)) * per_chunk] * (HV * (128 // block_v))
    slots = [0.0] * min(sms, len(items))
    end = 0.0
    for dur in items:
        t = heapq.heappop(slots) + dur
        heapq.heappush(slots, t)
        end = max(end, t)
    return end


def main():
    rows = [r for r in json.loads(SWEEP.read_text())["rows"] if r.get("gpu_ms") and r["forced"] != "rule"]
    by = {}
    for r in rows:
        by.setdefault((r["heads"], r["mix"], r["block_v"]), []).append(r)
    errs, offsets = [], {}
    for (heads, mix, bv), rs in sorted(by.items()):
        HV = int(heads.split("/")[1])
        pts = sorted((r["p_longest"], r["gpu_ms"] * 1e3, walk_us(r["seqlens"], r["parts"], HV, bv)) for r in rs)
        off = float(np.median([m - w for P, m, w in pts if P >= 2]))
        offsets[(heads, mix, bv)] = off
        errs += [abs(m - w - off) / m for P, m, w in pts if P >= 2]
        print(f"{heads:>5} {mix:>10} BV {bv:>3}: " + " ".join(f"P{P} {m:.0f}/{w + off:.0f}" for P, m, w in pts))
    print(f"measured/model µs above; |error| over P >= 2: median {np.median(errs):.3f}, p90 {np.quantile(errs, 0.9):.3f}")
    for heads in ("16/32", "8/32", "4/16", "2/8"):
        HV = int(heads.split("/")[1])
        off = offsets[(heads, "28672+4096", 128)]
        got = [(P, cp.parts_for_longest([448, 64], P)) for P in (4, 6, 7, 8, 14, 16)]
        print(f"{heads} 28672+4096 BV 128, model µs: "
              + ", ".join(f"{'+'.join(map(str, parts))}: {walk_us([28672, 4096], parts, HV, 128) + off:.0f}" for P, parts in got))


if __name__ == "__main__":
    main()
