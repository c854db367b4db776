"""Score the CP rule's floor (CPParams.min_seq_chunks) and partition length (min_chunks) as session 26
did (``h200-session26/eval_min_seq_chunks.py``): the plan's pick (the walk's V-block, widen_block_v
with tail starts, then P) on every swept row against the best measured (V-block, P) of that row,
geometric mean and worst, on GPU-busy time and on wall time (each (row, V-block, P) keeps its faster
sample). Sweeps: session 39's two runs of 2048-6144-token single sequences (``a-cp-short``,
``a2-cp-short``), session 38's (``f-cp-floor``), sessions 25-26's and session 19's tail sweep.

    python bench_serving/results/h200-session39/eval_cp_short.py
"""
import importlib.util
import pathlib
from dataclasses import replace

HERE = pathlib.Path(__file__).resolve().parent
# session 26's scoring (its ``score``: the plan's pick, by its ``pick``, against each row's best)
_spec = importlib.util.spec_from_file_location("eval26", HERE.parent / "h200-session26" / "eval_min_seq_chunks.py")
eval26 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(eval26)
cp = eval26.cp

RES = HERE.parent
SWEEPS = {
    "session 39": [RES / "h200-session39" / d / "cp_sweep.json" for d in ("a-cp-short", "a2-cp-short")],
    "session 38": [RES / "h200-session38" / "f-cp-floor" / "cp_sweep.json"],
    "sessions 25-26": [RES / "h200-session26" / "sweep7000" / "cp_sweep.json",
                       RES / "h200-session26" / "sweep" / "cp_sweep.json",
                       RES / "h200-session25" / "sweep" / "cp_sweep.json"],
    "session 19": [RES / "h200-session19" / "cp" / "cp-tail" / "cp_sweep.json"],
}


def score(files, params) -> str:
    return ", ".join(f"{'GPU' if metric == 'gpu_ms' else 'wall'} {geo:.3f} (worst {worst:.3f} {where}, {n} rows)"
                     for metric, geo, worst, where, n in eval26.score(files, params))


def main():
    for mc in (16, 8, 4):
        for msc in (32, 48, 64, 96):
            params = replace(cp.default_params(), min_chunks=mc, min_seq_chunks=msc)
            mark = " <- default" if (mc, msc) == (cp.DEFAULT_PARAMS.min_chunks, cp.DEFAULT_PARAMS.min_seq_chunks) else ""
            print(f"min_chunks {mc:2d}, min_seq_chunks {msc:3d}{mark}")
            for name, files in SWEEPS.items():
                print(f"    {name:15s} {score(files, params)}")


if __name__ == "__main__":
    main()
