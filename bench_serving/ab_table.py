"""The table of a kernel A/B (bench_serving/kernel_ab.sh): qla_ms per row for every label and V-block,
and each one's ratio to the checkout's kernel at the plan's V-block ("tree-bvplan", or BASE); then,
where the runs recorded it, kkt_solve's own GPU time per row for every label, with the same ratios.

    python bench_serving/ab_table.py OUT [BASE]   # reads OUT/<label>-bv<width>/kernels.json, prints markdown
"""
import glob
import json
import os
import re
import sys


def main(out: str, base: str = "tree-bvplan") -> None:
    runs = {}
    for path in sorted(glob.glob(os.path.join(out, "*-bv*", "kernels.json"))):
        with open(path) as f:
            runs[os.path.basename(os.path.dirname(path))] = json.load(f)
    if not runs:
        print(f"no kernels.json under {out}")
        return
    base = base if base in runs else next(iter(runs))
    names = [base] + [n for n in runs if n != base]
    keys = []
    for r in runs.values():
        for row in r["rows"]:
            if (row["heads"], row["mix"]) not in keys:
                keys.append((row["heads"], row["mix"]))

    def per_label(field: str, text) -> dict:
        """{label: {(heads, mix): (value, its text)}} of one field of every label's rows (value None: absent)."""
        return {n: {(row["heads"], row["mix"]): (row.get(field), text(row) if row.get(field) is not None else "")
                    for row in r["rows"]} for n, r in runs.items()}

    def ratio_cells(values: dict, key) -> list[str]:
        """One row's cells: each label's text, the others' with their ratio to the base label's value."""
        ref = values[base].get(key, (None, ""))[0]
        cells = []
        for n in names:
            t, text = values[n].get(key, (None, ""))
            cell = "—" if t is None else text
            if t is not None and ref and n != base:
                cell += f" ×{t / ref:.2f}"
            cells.append(cell)
        return cells

    ms = per_label("qla_ms", lambda row: f"{row['qla_ms']:.3f} ({row.get('qla_block_v')})")
    kkt = {(row["heads"], row["mix"]): row.get("qla_kkt_only_ms") for row in runs[base]["rows"]}
    print(f"# Kernel A/B: qla_ms (V-block the run used), ratio to {base}; 'kkt only' = the run of {base} without the walk\n")
    print("| heads | lengths | kkt only | " + " | ".join(names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for key in keys:
        k = kkt.get(key)
        print(f"| {key[0]} | {key[1]} | {'—' if k is None else f'{k:.3f}'} | " + " | ".join(ratio_cells(ms, key)) + " |")
    kkt_gpu = per_label("qla_kkt_only_gpu_ms", lambda row: f"{row['qla_kkt_only_gpu_ms']:.4f}")
    if any(t is not None for per in kkt_gpu.values() for t, _ in per.values()):
        # kkt_solve's own GPU time in every label's run: an A/B of kkt_solve shows there undiluted
        # by the walk (a quarter of a long call: its whole-call ratio moves four times less)
        print("\nkkt_solve alone, GPU time (ms; the walk not launched), ratio to " + base + ":\n")
        print("| heads | lengths | " + " | ".join(names) + " |")
        print("|---|---|" + "---|" * len(names))
        for key in keys:
            print(f"| {key[0]} | {key[1]} | " + " | ".join(ratio_cells(kkt_gpu, key)) + " |")
    print("\nAccuracy (2/8, 512+300+77, vs fp64; identical digits = identical outputs):\n")
    for n in names:
        acc = runs[n].get("accuracy", {}).get("qla")
        print(f"- {n}: {json.dumps(acc)}")
    r0 = runs[base]
    # the script was kernels.py before session 35; older runs' commands name it so
    args = re.split(r"(?:kernels|kernel_bench)\.py", r0.get("command", ""), maxsplit=1)[-1].strip()
    print(f"\nGPU {r0.get('gpu')}; versions {json.dumps(r0.get('versions'))}; command per run: kernel_bench.py {args}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
