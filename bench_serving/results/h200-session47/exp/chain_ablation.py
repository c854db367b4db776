"""How much of the walk's chunk step is its output work: the CP partials walk (phase 1: state only,
no Oᵀ, no Uᵀ Pᵀ, no output store) against the output walk (phase 3) of the same call, both one CTA
per SM on fewer CTAs than SMs, each walking the same number of chunks.

    QLA_CP_TAIL=0 QLA_CP_PARTS=2 python bench_serving/results/h200-session47/exp/chain_ablation.py

With tail starts off and P = 2 the partials walk all of partition 0 (h rows with the real v, and the
transition rows M with v ≡ 0: HV·(V/BV) CTAs each) and the output walk both partitions (2·HV·(V/BV)
CTAs), every CTA 256 chunks of one 1×32768 sequence. Prints each kernel's GPU µs per call (torch
profiler, 10 calls) and µs per chunk step. Inputs and plan as bench_serving/kernel_bench.py's.
"""
import collections
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
import kernel_bench as kb  # noqa: E402


def main() -> None:
    rows = []
    for heads in (os.environ.get("HEADS") or "16/32,16/64").split(","):
        H, HV = (int(s) for s in heads.split("/"))
        x = kb.make_inputs([32768], H, HV)
        kernel, _ = kb.qla_fns(x)
        kernel()
        torch.cuda.synchronize()
        reps = 10
        per = collections.defaultdict(float)
        for e in kb.device_events(kernel, reps):
            per[e.name] += (e.time_range.end - e.time_range.start) / reps
        choice = kb.qla_choices(kernel.plan)
        parts = (choice.get("qla_cp_parts") or [1])[0]
        chunks = 32768 // 64 // parts
        row = {"heads": heads, **choice, "chunks_per_cta": chunks,
               "kernels_us": {k: round(v, 1) for k, v in sorted(per.items(), key=lambda kv: -kv[1])}}
        for k, v in per.items():
            if "fused_fwd" in k:
                row[f"{k}_us_per_chunk"] = round(v / chunks, 3)
        rows.append(row)
        print(json.dumps(row))
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "chain_ablation.json"), "w") as f:
            json.dump({"env": {k: os.environ.get(k) for k in ("QLA_CP_TAIL", "QLA_CP_PARTS", "QLA_BLOCK_V")},
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
