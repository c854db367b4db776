"""Session 26's scoring of CPParams.min_seq_chunks (``h200-session26/eval_min_seq_chunks.py``: the
plan's pick against each swept row's best measured (V-block, P), geometric mean and worst, GPU-busy
and wall) on session 38's sweep of 3072–6144-token single sequences (``f-cp-floor/``) alone, then
with the earlier sweeps that script reads.

    python bench_serving/results/h200-session38/eval_min_seq_chunks.py
"""
import importlib.util
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("eval26", HERE.parent / "h200-session26" / "eval_min_seq_chunks.py")
eval26 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(eval26)

OLD = list(eval26.FILES)
for name, files in (("session 38's sweep alone", [HERE / "f-cp-floor" / "cp_sweep.json"]),
                    ("with sessions 25-26's sweeps", OLD + [HERE / "f-cp-floor" / "cp_sweep.json"])):
    print(f"== {name}")
    eval26.FILES = files
    eval26.main()
