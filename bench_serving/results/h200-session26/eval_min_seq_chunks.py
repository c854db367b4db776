"""Score CPParams.min_seq_chunks on session 26's sweeps (and session 25's): for each bound, the plan's
pick (V-block by widen_block_v with tail starts, then P) on every swept row against the best measured
(V-block, P) of that row, geometric mean and worst, on GPU-busy time and on wall time.

    python bench_serving/results/h200-session26/eval_min_seq_chunks.py
"""
import json
import math
import pathlib
import sys
from dataclasses import replace

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from qla_serve.kernels import hopper  # noqa: E402
from qla_serve.kernels.hopper import cp  # noqa: E402

RES = ROOT / "bench_serving" / "results"
FILES = [RES / "h200-session26" / "sweep7000" / "cp_sweep.json", RES / "h200-session26" / "sweep" / "cp_sweep.json",
         RES / "h200-session25" / "sweep" / "cp_sweep.json"]


def pick(seqlens, HV, params):
    bv = cp.widen_block_v(seqlens, HV, 128, hopper.choose_block_v(seqlens, HV, 128, 132), 132, params, tail=True)
    return bv, cp.rule_p_longest(seqlens, HV, 128, bv, 132, params)


def score(files, params):
    """The plan's pick against each swept row's best, per metric: [(metric, geomean, worst ratio,
    worst row, rows scored)] for "gpu_ms" and "ms"."""
    rows = [r for f in files for r in json.loads(f.read_text())["rows"]]
    tabs = {m: cp._sweep_table(rows, m) for m in ("gpu_ms", "ms")}
    meta = {(r["heads"], r["mix"]): r for r in rows}
    keys = sorted({(k[0], k[1]) for k in tabs["ms"]})
    out = []
    for metric in ("gpu_ms", "ms"):
        logs, worst = [], (1.0, "")
        for h, m in keys:
            HV = int(h.split("/")[1])
            bv, p = pick(meta[(h, m)]["seqlens"], HV, params)
            times = tabs[metric].get((h, m, bv))
            if not times:
                continue
            t = cp._measured_at(times, p)
            best = min(min(tabs[metric][(h, m, b)].values()) for b in (64, 128) if (h, m, b) in tabs[metric])
            logs.append(math.log(t / best))
            worst = max(worst, (t / best, f"{h} {m} bv{bv} P{p}"))
        out.append((metric, math.exp(sum(logs) / len(logs)), worst[0], worst[1], len(logs)))
    return out


def main():
    for msc in (32, 64, 80, 96, 110, 128):
        params = replace(cp.default_params(), min_seq_chunks=msc)
        line = [f"min_seq_chunks {msc:3d}:"]
        for metric, geo, worst, where, n in score(FILES, params):
            line.append(f"{'GPU' if metric == 'gpu_ms' else 'wall'} geomean {geo:.3f} "
                        f"worst {worst:.3f} ({where}) over {n} rows;")
        print(" ".join(line))


if __name__ == "__main__":
    main()
