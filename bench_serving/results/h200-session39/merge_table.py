"""Session 39's issue-3 table (``table/``) at the session's final CP rule, from three calls:
``table-b`` (2/8, 4/16, 8/32) and ``table-c`` (16/32, 16/64, 16/48) ran all 72 rows at an interim rule
(min_chunks 8, no rider charge); the final rule picks session 38's (V-block, P) on every row, and the
interim one differed on eight: 7000+600+300+200+92 at 2/8 and 4/16, 256x1+4096 at all six heads.
Those rows come from ``b-riders/table`` (QLA and FlashQLA at the final rule; FLA where that call,
cut at its 200-s limit before its own merge, reached it; the ratios are recomputed here).

    python bench_serving/results/h200-session39/merge_table.py
"""
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
import kernel_bench  # noqa: E402

REDONE = {("2/8", "7000+600+300+200+92"), ("4/16", "7000+600+300+200+92")} | {
    (h, "256x1+4096") for h in ("2/8", "4/16", "8/32", "16/32", "16/64", "16/48")}


def main():
    runs = [json.loads((HERE / d / "kernels.json").read_text()) for d in ("table-b", "table-c")]
    riders = {(r["heads"], r["mix"]): r for r in json.loads((HERE / "b-riders" / "table" / "kernels.json").read_text())["rows"]}
    rows, source = [], {}
    for run in runs:
        for r in run["rows"]:
            key = (r["heads"], r["mix"])
            if key in REDONE:
                r, source[f"{key[0]} {key[1]}"] = dict(riders[key]), "b-riders/table"
                kernel_bench.add_ratios(r)
            rows.append(r)
    result = dict(runs[0])
    result["command"] = " ; ".join(r["command"] for r in runs) + " ; rows " + json.dumps(source)
    result["rows"] = rows
    result["row_sources"] = source
    out = HERE / "table"
    out.mkdir(exist_ok=True)
    (out / "kernels.json").write_text(json.dumps(result, indent=1))
    kernel_bench.write_markdown(result, str(out / "kernels.md"))
    kernel_bench.plot(result, str(out / "kernels.png"))
    print("\n".join(kernel_bench.targets(rows)))


if __name__ == "__main__":
    main()
