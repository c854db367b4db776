"""Session 57: issue 3's table on the H100 80GB HBM3 with FlashQLA in every head config, assembled from
the three sessions whose runs, together, cover all six (FlashQLA's JIT took each run's budget before it
reached them all). Each head config's twelve rows come whole from ONE run (QLA, FlashQLA and FLA on the
same inputs, each backend in its own process); nothing is mixed across runs within a row. The rows
keep their source in ``source``. FlashInfer's columns appear only where that run carried it (16/32, 2/8).
    python3 bench_serving/results/h200-session57/scripts/assemble_h100.py    # from the repo root
writes bench_serving/results/h200-session57/h100-assembled/kernels.{json,md,png}.
"""
import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../../../.."))
sys.path.insert(0, os.path.join(ROOT, "bench_serving"))
import kernel_bench as kb  # noqa: E402

RESULTS = os.path.join(ROOT, "bench_serving/results")
SOURCES = {                       # head config → the run whose rows it takes (the latest with FlashQLA on the most rows)
    "16/64": "h200-session55/call2-table",
    "16/32": "h200-session56/call2-fi-16-32-2-8",
    "16/48": "h200-session57/call3-table-4-16-16-48",
    "8/32": "h200-session56/call4-table-8-32-4-16",
    "4/16": "h200-session57/call3-table-4-16-16-48",
    "2/8": "h200-session56/call2-fi-16-32-2-8",
}


def main():
    rows, gpus, versions, commands, missing = [], set(), {}, {}, []
    for heads, src in SOURCES.items():
        run = json.load(open(os.path.join(RESULTS, src, "table/kernels.json")))
        gpus.add(run["gpu"])
        versions[src] = run["versions"]
        commands[src] = run["command"]
        got = [dict(r, source=src) for r in run["rows"] if r["heads"] == heads]
        assert len(got) == 12, (heads, src, len(got))
        missing += [f"{heads} {r['mix']}" for r in got if r.get("flashqla_ms") is None]
        rows += got
    assert len(gpus) == 1, gpus
    out = os.path.join(RESULTS, "h200-session57/h100-assembled")
    os.makedirs(out, exist_ok=True)
    result = {"gpu": gpus.pop(), "versions": versions,
              "command": "assembled by h200-session57/scripts/assemble_h100.py from: "
                         + "; ".join(f"{s}: {c}" for s, c in commands.items()),
              "sources": SOURCES, "rows": rows}
    with open(os.path.join(out, "kernels.json"), "w") as f:
        json.dump(result, f, indent=1)
    kb.write_markdown(result, os.path.join(out, "kernels.md"))
    kb.plot(result, os.path.join(out, "kernels.png"))
    print("\n".join(kb.targets(rows)))
    print("rows without FlashQLA (its JIT ran out of that run's budget):", ", ".join(missing) or "none")


if __name__ == "__main__":
    main()
