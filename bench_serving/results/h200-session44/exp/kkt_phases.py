"""Where kkt_solve spends its stall samples and instructions, phase by phase, from an ncu source page.

    python bench_serving/results/h200-session44/exp/kkt_phases.py SOURCE_CSV_GZ [CTAS]

SOURCE_CSV_GZ: ``source-qla_kkt_solve.csv.gz`` of ``bench_serving/ncu_walk.sh`` (e.g.
``results/h200-session42/c-ncu/``). The SASS is cut before every ``BAR.SYNC`` (TileLang's
``__syncthreads``): each phase is the code one barrier lets through, named by the instructions that
mark it (HGMMA: K Kᵀ; MUFU: L's exponentials; the forward substitution's FFMA run; HMMA: a merge
product; UTMA: TMA loads / stores). CTAS (default: the kernel's grid, read as the
executions of its first instruction / 4 warps) turns executed warp instructions into a count per CTA.
Session 44 read session 42's page this way (the prologue, K by plain loads and its stores waiting on
them, 21 % of the samples) before making the kernel persistent.
"""
import collections
import csv
import gzip
import re
import sys


def main(path: str, ctas: float | None = None) -> None:
    rows = list(csv.reader(gzip.open(path, "rt")))
    start = [i for i, r in enumerate(rows) if r and r[0] == "Kernel Name"][0]
    hdr = rows[start + 1]
    ix = {h: i for i, h in enumerate(hdr)}
    data = [r for r in rows[start + 2:] if len(r) == len(hdr)]
    num = lambda x: float(x.replace(",", "")) if x not in ("", "-") else 0.0  # noqa: E731
    S, E = ix["Warp Stall Sampling (All Samples)"], ix["Instructions Executed"]
    stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    src = [re.sub(r"^@!?U?P\w+\s+", "", r[ix["Source"]].strip()) for r in data]
    ctas = ctas or num(data[0][E]) / 4
    total = sum(num(r[S]) for r in data) or 1.0
    cuts = [0] + [k for k, s in enumerate(src) if s.startswith("BAR.SYNC")] + [len(src)]
    print(f"{total:.0f} samples, {sum(num(r[E]) for r in data) / ctas:.0f} warp instructions per CTA ({ctas:.0f} CTAs)")
    print("| phase | SASS lines | samples | % | warp instr / CTA | top stalls | marks |")
    print("|---|---|---|---|---|---|---|")
    for a, b in zip(cuts, cuts[1:]):
        if b <= a:
            continue
        n = sum(num(data[k][S]) for k in range(a, b))
        ins = sum(num(data[k][E]) for k in range(a, b)) / ctas
        st = collections.Counter()
        for k in range(a, b):
            for s in stalls:
                st[s[6:]] += num(data[k][ix[s]])
        ops = collections.Counter(s.split()[0].split(".")[0] for s in src[a:b] if s)
        marks = [m for m in ("HGMMA", "HMMA", "MUFU", "UTMALDG", "UTMASTG", "LDG", "STG", "SHFL") if ops[m]]
        if ops["FFMA"] >= 60:
            marks.append(f"FFMA×{ops['FFMA']}")
        top = ", ".join(f"{k} {v / max(n, 1) * 100:.0f}%" for k, v in st.most_common(2) if v)
        print(f"| {data[a][ix['Address']][-5:]} | {b - a} | {n:.0f} | {n / total * 100:.1f} | {ins:.0f} | {top} | {' '.join(marks)} |")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else None)
