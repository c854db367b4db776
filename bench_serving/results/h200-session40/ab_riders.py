"""Session 40 call A's comparison: GPU-busy ms per (heads, row, V-block, forced P) of the checkout
("tree") and the riders-from-pool copy ("pool"), rounds alternated on one machine. Prints a markdown
table: each label's rounds, the pool/tree ratio of the round means, and both diffs against P = 1.

    python ab_riders.py CALL_OUT_DIR      (holds tree-r1/, pool-r1/, tree-r2/, pool-r2/, each cp/ and riders/)
"""
import json
import math
import sys
from pathlib import Path

root = Path(sys.argv[1])
runs: dict[tuple, dict[str, list[float]]] = {}
parts: dict[tuple, dict[str, list]] = {}
worst_diff = 0.0
for d in sorted(root.glob("*-r*")):
    if not d.is_dir():
        continue
    label = d.name.split("-r")[0]
    for kind in ("cp", "riders"):
        f = d / kind / "cp_sweep.json"
        if not f.exists():
            continue
        for r in json.loads(f.read_text())["rows"]:
            if r.get("gpu_ms") is None:
                continue
            key = (kind, r["heads"], r["mix"], r["block_v"], str(r["forced"]))
            runs.setdefault(key, {}).setdefault(label, []).append(r["gpu_ms"])
            parts.setdefault(key, {})[label] = r["parts"] if len(r["parts"]) <= 3 else f"{max(r['parts'])} max"
            worst_diff = max(worst_diff, r.get("out_rel_diff_vs_p1") or 0.0, r.get("state_rel_diff_vs_p1") or 0.0)

print("| sweep | heads | row | V-block | P | tree ms (rounds) | pool ms (rounds) | pool / tree |")
print("|---|---|---|---|---|---|---|---|")
logs: dict[str, list[float]] = {}
for key in sorted(runs, key=lambda k: (k[0], k[2], int(k[1].split('/')[1]), k[3], k[4])):
    t, p = runs[key].get("tree", []), runs[key].get("pool", [])
    if not t or not p:
        continue
    ratio = (sum(p) / len(p)) / (sum(t) / len(t))
    kind, heads, mix, bv, forced = key
    logs.setdefault(f"{kind} V-block {bv}" + (" rule" if forced == "rule" else ""), []).append(math.log(ratio))
    pk = parts[key]
    pick = f" ({pk.get('tree')} / {pk.get('pool')})" if forced == "rule" else ""
    print(f"| {kind} | {heads} | {mix} | {bv} | {forced}{pick} | {' / '.join(f'{x:.4f}' for x in t)} | "
          f"{' / '.join(f'{x:.4f}' for x in p)} | {ratio:.3f} |")
print()
for k, v in sorted(logs.items()):
    print(f"- {k}: geomean pool / tree {math.exp(sum(v) / len(v)):.3f} over {len(v)} rows "
          f"(min {math.exp(min(v)):.3f}, max {math.exp(max(v)):.3f})")
print(f"- largest o/state difference of any forced P against P = 1: {worst_diff:.2e}")
