"""Where each warp role of a walk kernel spends its stall samples, from ncu_walk.sh's source page
(session 42's exp/ncu_roles.py, generalised: any walk kernel by name, chunks per warp counted from the
plan instead of assumed).

    python ncu_roles.py SOURCE_CSV_GZ KERNEL_NAME_SUBSTRING WARP_CHUNKS

Roles are split at the SASS ``USETMAXREG`` instructions (IO warps, WG_P, then one per consumer
warpgroup); an mbarrier wait is a ``SYNCS…TRYWAIT`` or a branch into the retry blocks after the last
``EXIT``. WARP_CHUNKS: chunks walked by all CTAs together times 4 (warps a role), for the per-chunk
instruction column."""
import collections
import csv
import gzip
import re
import sys


def main(path: str, kernel: str, warp_chunks: float) -> None:
    rows = list(csv.reader(gzip.open(path, "rt")))
    starts = [i for i, r in enumerate(rows) if r and r[0] == "Kernel Name" and kernel in r[1]]
    if not starts:
        sys.exit(f"no kernel matching {kernel!r} in {path}")
    start = starts[0]
    hdr = rows[start + 1]
    ix = {h: i for i, h in enumerate(hdr)}
    data = []
    for r in rows[start + 2:]:
        if r and r[0] == "Kernel Name":
            break
        if len(r) == len(hdr):
            data.append(r)
    num = lambda x: float(x.replace(",", "")) if x not in ("", "-") else 0.0  # noqa: E731
    src = [r[ix["Source"]].strip() for r in data]
    addr = [int(r[ix["Address"]], 16) for r in data]
    S, E = ix["Warp Stall Sampling (All Samples)"], ix["Instructions Executed"]
    cuts = [k for k, s in enumerate(src) if "USETMAXREG" in s]
    retry = max(k for k, s in enumerate(src) if s.startswith("EXIT")) + 1
    names = ["IO warps", "WG_P"] + [f"consumer {i}" for i in range(len(cuts) - 2)]
    bounds = list(zip(cuts, cuts[1:] + [retry]))
    cats = ("mbarrier wait", "wgmma wait", "wgmma issue", "shared ld/st", "global ld/st", "other")
    print(f"kernel {rows[start][1]}: {int(sum(num(r[S]) for r in data))} samples, "
          f"{len(cuts)} USETMAXREG cuts; the prologue before the first cut: "
          f"{int(sum(num(data[k][S]) for k in range(0, cuts[0] if cuts else 0)))} samples")
    print("| role | samples | " + " | ".join(cats) + " | warp instructions per chunk |")
    print("|---|---|" + "---|" * len(cats) + "---|")
    for name, (a, b) in zip(names, bounds):
        cat = collections.Counter()
        for k in range(a, b):
            s, n = src[k], num(data[k][S])
            m = re.search(r"BRA (0x[0-9a-f]+)", s)
            if "DEPBAR" in s or "WARPGROUP.DEPBAR" in s:
                c = "wgmma wait"
            elif "TRYWAIT" in s or (m and int(m.group(1), 16) >= addr[retry]):
                c = "mbarrier wait"
            elif s.startswith("HGMMA"):
                c = "wgmma issue"
            elif s.startswith(("LDS", "STS", "LDSM", "STSM")):
                c = "shared ld/st"
            elif s.startswith(("LDG", "STG", "UTMA", "UBLKCP")):
                c = "global ld/st"
            else:
                c = "other"
            cat[c] += n
        tot = sum(cat.values()) or 1
        per_chunk = sum(num(data[k][E]) for k in range(a, b)) / warp_chunks
        print(f"| {name} | {int(tot)} | " + " | ".join(f"{cat[c] / tot:.0%}" for c in cats) + f" | {per_chunk:.0f} |")
    # the hottest lines overall
    top = sorted(range(len(data)), key=lambda k: -num(data[k][S]))[:25]
    print("\nhottest SASS lines (samples, role, source):")
    for k in top:
        role = next((nm for nm, (a, b) in zip(names, bounds) if a <= k < b), "prologue/retry")
        print(f"{int(num(data[k][S])):7d}  {role:11s} {src[k][:90]}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
