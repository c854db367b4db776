"""GPU time (qla_gpu_ms: the call's kernels, CUPTI) of an A/B's runs side by side, with each
alternative's ratio to the tree at the same V-block. ab.md's table is the kernel column (wall time of
the call), which host noise moves on the host-bound 2/8 rows.

    python gpu_time_ab.py AB_DIR [ALT]     # AB_DIR holds tree-bv{64,128}/ and ALT-bv{64,128}/ kernels.json
"""
import json
import pathlib
import sys

ab, alt = pathlib.Path(sys.argv[1]), (sys.argv[2] if len(sys.argv) > 2 else "PAIRS")
labels = ["tree-bv128", f"{alt}-bv128", "tree-bv64", f"{alt}-bv64"]
runs = {lab: {(r["heads"], r["mix"]): r for r in json.loads((ab / lab / "kernels.json").read_text())["rows"]}
        for lab in labels}
print("| heads | mix | " + " | ".join(labels) + f" | {alt}/tree at 128 | at 64 |")
print("|---" * (len(labels) + 4) + "|")
for key, row in runs["tree-bv128"].items():
    g = [runs[lab][key]["qla_gpu_ms"] for lab in labels]
    print(f"| {key[0]} | {key[1]} | " + " | ".join(f"{x:.4f}" for x in g) + f" | ×{g[1] / g[0]:.3f} | ×{g[3] / g[2]:.3f} |")
