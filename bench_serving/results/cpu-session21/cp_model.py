"""Session 21 (CPU only): the CP cost model fitted on session 19's tail sweep, and its predictions
for partition counts that fill whole waves (``CPParams.any_count``), which no sweep has measured.

    python bench_serving/results/cpu-session21/cp_model.py > bench_serving/results/cpu-session21/cp_model.txt

Per swept (heads, row) at V-block 128: the measured GPU-busy time at every P, the rule's pick (powers
of two) and the any-count pick, with the model's prediction (its estimate plus the row's fitted
offset) for each.
"""
import json
from pathlib import Path

from qla_serve.kernels.hopper import cp

SWEEP = Path(__file__).resolve().parents[1] / "h200-session19/cp/cp-tail/cp_sweep.json"


def main():
    sweep = json.loads(SWEEP.read_text())
    fit = cp.fit_cost(sweep)
    for bv, f in fit.items():
        print(f"V-block {bv}: cost_us (fixed, per_chunk, per_part) = {f['cost_us']}, mean |error| "
              f"{f['mean_rel_error']:.3f}, median {f['median_rel_error']:.3f}  (CP_COST_US: {cp.CP_COST_US[bv]})")
    bv = 128
    cost, offsets = fit[bv]["cost_us"], fit[bv]["row_offsets_us"]
    rows = {}
    for r in sweep["rows"]:
        if r["block_v"] == bv and r.get("gpu_ms") and r["forced"] != "rule":
            rows.setdefault((r["heads"], r["mix"]), (r["seqlens"], {}))[1][r["p_longest"]] = r["gpu_ms"] * 1e3
    print(f"\nV-block {bv}: measured GPU µs per P | pick (powers of two) | pick (any count): predicted µs")
    for (heads, mix), (seqlens, times) in sorted(rows.items()):
        HV = int(heads.split("/")[1])
        nch = [(n + 63) // 64 for n in seqlens]
        off = offsets.get(f"{heads} {mix}")

        def predict(P):
            return cp.cp_estimate_us(nch, cp.parts_for_longest(nch, P), HV, cost) + off

        p2 = cp.rule_p_longest(seqlens, HV, 128, bv, 132, cp.DEFAULT_PARAMS)
        pa = cp.rule_p_longest(seqlens, HV, 128, bv, 132, cp.CPParams(any_count=True))
        meas = " ".join(f"P{P} {t:.0f}" for P, t in sorted(times.items()))
        if off is None or p2 < 2:
            print(f"{heads:>5} {mix:>10}: {meas} | not split")
            continue
        print(f"{heads:>5} {mix:>10}: {meas} | P{p2} measured {times.get(p2, float('nan')):.0f}, "
              f"predicted {predict(p2):.0f} | P{pa} {cp.parts_for_longest(nch, pa)} predicted {predict(pa):.0f}")


if __name__ == "__main__":
    main()
