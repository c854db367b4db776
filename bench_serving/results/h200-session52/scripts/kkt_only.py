"""Session 52's call scripts: kkt_solve alone (µs, GPU-busy) and the whole call (ms, GPU-busy) per row
for each label of a kernel_ab.sh run.   python3 kkt_only.py AB_DIR LABEL [LABEL ...]"""
import json
import os
import sys

for label in sys.argv[2:]:
    path = os.path.join(sys.argv[1], f"{label}-bvplan", "kernels.json")
    if os.path.exists(path):
        print(label, [(r["heads"], r["mix"], round((r.get("qla_kkt_only_gpu_ms") or 0) * 1e3, 1),
                       round(r.get("qla_gpu_ms") or 0, 3)) for r in json.load(open(path))["rows"]])
