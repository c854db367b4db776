"""Where each warp role of the output walk spends its stall samples, from session 42's ncu source page.

    python bench_serving/results/h200-session42/exp/ncu_roles.py [c-ncu/source-qla_fused_fwd.csv.gz]

The page holds two kernels (the CP partials walk, then the output walk qla_fused_fwd_from_starts),
each with its own header (the second has one column more). Roles are split at the SASS
``USETMAXREG`` instructions (IO warps dealloc to 32, WG_P to 64, each consumer allocs 208); an
mbarrier wait is a ``SYNCS…TRYWAIT`` or a branch into the retry blocks after the last ``EXIT``.
"""
import collections
import csv
import gzip
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(path: str) -> None:
    rows = list(csv.reader(gzip.open(path, "rt")))
    start = [i for i, r in enumerate(rows) if r and r[0] == "Kernel Name" and "from_starts" in r[1]][0]
    hdr = rows[start + 1]
    ix = {h: i for i, h in enumerate(hdr)}
    data = [r for r in rows[start + 2:] if len(r) == len(hdr)]
    num = lambda x: float(x.replace(",", "")) if x not in ("", "-") else 0.0  # noqa: E731
    src = [r[ix["Source"]].strip() for r in data]
    addr = [int(r[ix["Address"]], 16) for r in data]
    S, E = ix["Warp Stall Sampling (All Samples)"], ix["Instructions Executed"]
    cuts = [k for k, s in enumerate(src) if "USETMAXREG" in s]
    retry = max(k for k, s in enumerate(src) if s.startswith("EXIT")) + 1
    names = ["IO warps", "WG_P", "consumer 0", "consumer 1"]
    bounds = list(zip(cuts, cuts[1:] + [retry]))
    print("| role | samples | mbarrier wait | wgmma wait | wgmma issue | shared ld/st | other | warp instructions per chunk |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (a, b) in zip(names, bounds):
        cat = collections.Counter()
        for k in range(a, b):
            s, n = src[k], num(data[k][S])
            m = re.search(r"BRA (0x[0-9a-f]+)", s)
            if "DEPBAR" in s:
                c = "wgmma wait"
            elif "TRYWAIT" in s or (m and int(m.group(1), 16) >= addr[retry]):
                c = "mbarrier wait"
            elif s.startswith("HGMMA"):
                c = "wgmma issue"
            elif s.startswith(("LDS", "STS", "LDSM", "STSM")):
                c = "shared ld/st"
            else:
                c = "other"
            cat[c] += n
        tot = sum(cat.values())
        # 16/32 1x32768 with CP: 128 CTAs x 128 chunks, 4 warps a role
        per_chunk = sum(num(data[k][E]) for k in range(a, b)) / (128 * 128 * 4)
        print(f"| {name} | {int(tot)} | " + " | ".join(f"{cat[c] / tot:.0%}" for c in
              ("mbarrier wait", "wgmma wait", "wgmma issue", "shared ld/st", "other")) + f" | {per_chunk:.0f} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "c-ncu", "source-qla_fused_fwd.csv.gz"))
