"""Totals of an ncu source page (ncu_kkt in call_kkt6.sh / call_kktz.sh: --page source --csv --print-source sass)
by SASS opcode: instructions executed, shared-memory wavefronts (ideal, excess from bank conflicts),
warp-stall samples, and the kernel's stall reasons.

    python ncu_source_sum.py ncu-tree/source-qla_kkt_solve.csv.gz   # from the call's all.tar.gz
"""
import collections
import csv
import gzip
import sys

rows = list(csv.reader(gzip.open(sys.argv[1], "rt")))
hdr = rows[1]; data = [r for r in rows[2:] if len(r) == len(hdr)]
ix = {h: i for i, h in enumerate(hdr)}
def num(x):
    try: return float(x)
    except: return 0.0
by = collections.defaultdict(lambda: collections.Counter())
tot = collections.Counter()
stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
for r in data:
    op = r[ix["Source"]].strip().split()[0] if r[ix["Source"]].strip() else "?"
    if op.startswith("@"): op = r[ix["Source"]].strip().split()[1]
    op = op.split(".")[0]
    c = by[op]
    for k in ("Instructions Executed", "L1 Wavefronts Shared", "L1 Wavefronts Shared Ideal", "L1 Wavefronts Shared Excessive", "Warp Stall Sampling (All Samples)", "L2 Theoretical Sectors Global"):
        c[k] += num(r[ix[k]]); tot[k] += num(r[ix[k]])
    for s in stalls:
        tot[s] += num(r[ix[s]])
print({k: int(v) for k, v in tot.items() if not k.startswith("stall")})
print("stalls:", sorted(((int(v), k) for k, v in tot.items() if k.startswith("stall") and v), reverse=True)[:10])
print(f"{'op':10} {'instr':>10} {'wf_sh':>10} {'wf_ideal':>10} {'excess':>10} {'samples':>8}")
for op, c in sorted(by.items(), key=lambda kv: -kv[1]["L1 Wavefronts Shared"] - kv[1]["Warp Stall Sampling (All Samples)"])[:22]:
    print(f"{op:10} {int(c['Instructions Executed']):10} {int(c['L1 Wavefronts Shared']):10} {int(c['L1 Wavefronts Shared Ideal']):10} {int(c['L1 Wavefronts Shared Excessive']):10} {int(c['Warp Stall Sampling (All Samples)']):8}")
