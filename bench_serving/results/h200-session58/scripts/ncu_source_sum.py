"""Totals of an ncu source page (``ncu --page source --csv --print-source sass``, as
bench_serving/ncu_walk.sh writes it for call_kkt_ab.sh) by SASS opcode: instructions executed,
shared-memory wavefronts (ideal, and the excess from bank conflicts), warp-stall samples; the
kernel's stall reasons; and, with --regions, the stall samples of address ranges (the phases of
the README's table were cut at the kernel's BAR.SYNC addresses, which --bars lists).

    python ncu_source_sum.py ncu-Z/source-qla_kkt_solve.csv.gz            # from the call's all.tar.gz
    python ncu_source_sum.py FILE --bars
    python ncu_source_sum.py FILE --regions "prologue:0-d11c0,L:d11c0-d24b0,..."   # low 20 address bits, hex
"""
import argparse
import collections
import csv
import gzip

COUNTS = ("Instructions Executed", "L1 Wavefronts Shared", "L1 Wavefronts Shared Ideal",
          "L1 Wavefronts Shared Excessive", "Warp Stall Sampling (All Samples)")


def num(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0


def read(path: str) -> tuple[list[str], list[list[str]]]:
    with gzip.open(path, "rt") as f:
        rows = list(csv.reader(f))
    header = rows[1]                      # row 0 names the kernel
    return header, [r for r in rows[2:] if len(r) == len(header)]


def opcode(source: str) -> str:
    words = source.strip().split()
    if not words:
        return "?"
    op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    return op.split(".")[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source_csv_gz")
    ap.add_argument("--bars", action="store_true", help="list the BAR.SYNC addresses (region cut points)")
    ap.add_argument("--regions", default="", help="NAME:LO-HI,... (hex, low 20 bits of the address)")
    args = ap.parse_args()
    header, data = read(args.source_csv_gz)
    col = {h: i for i, h in enumerate(header)}
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    address = lambda r: int(r[col["Address"]], 16) & 0xFFFFF  # noqa: E731

    if args.bars:
        for r in data:
            if r[col["Source"]].strip().startswith("BAR"):
                print(f"{address(r):05x} {r[col['Source']].strip()}")
        return

    by_op: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    total: collections.Counter = collections.Counter()
    for r in data:
        c = by_op[opcode(r[col["Source"]])]
        for k in COUNTS:
            c[k] += num(r[col[k]])
            total[k] += num(r[col[k]])
        for s in stalls:
            total[s] += num(r[col[s]])
    print({k: int(total[k]) for k in COUNTS})
    print("stalls:", sorted(((int(v), k) for k, v in total.items() if k.startswith("stall") and v), reverse=True)[:10])
    print(f"{'op':10} {'instr':>10} {'wf_shared':>10} {'wf_ideal':>10} {'excess':>10} {'samples':>8}")
    ranked = sorted(by_op.items(), key=lambda kv: -kv[1][COUNTS[1]] - kv[1][COUNTS[4]])
    for op, c in ranked[:22]:
        print(f"{op:10} " + " ".join(f"{int(c[k]):10}" for k in COUNTS[:4]) + f" {int(c[COUNTS[4]]):8}")

    if args.regions:
        samples = total[COUNTS[4]]
        print(f"\n{'region':40} {'samples':>8} {'share':>6}  top stall reasons")
        for spec in args.regions.split(","):
            name, bounds = spec.rsplit(":", 1)
            lo, hi = (int(x, 16) for x in bounds.split("-"))
            rows = [r for r in data if lo <= address(r) < hi]
            n = sum(num(r[col[COUNTS[4]]]) for r in rows)
            why = collections.Counter({s[6:]: sum(num(r[col[s]]) for r in rows) for s in stalls})
            top = ", ".join(f"{k} {v:.0f}" for k, v in why.most_common(3))
            print(f"{name:40} {n:8.0f} {100 * n / samples:5.1f}%  {top}")


if __name__ == "__main__":
    main()
