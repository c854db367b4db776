"""Session 57: session 54's call_bytes.sh output (ncu CSVs, one per backend × row) as one markdown table:
per kernel its GPU time, DRAM bytes read / written and ncu's DRAM-throughput share, then each call's
totals and its average DRAM rate.
    python3 bytes_table.py DIR        # DIR: the bytes/ folder of the call's all.tar.gz
"""
import collections
import csv
import glob
import io
import os
import sys


def kernels(path):
    """{(launch id, kernel name): {metric: value}} of one ncu --csv file (its non-CSV lines dropped)."""
    lines = [ln for ln in open(path) if ln.startswith('"')]
    out = collections.OrderedDict()
    for r in csv.DictReader(io.StringIO("".join(lines))):
        out.setdefault((r["ID"], r["Kernel Name"]), {})[r["Metric Name"]] = r["Metric Value"].replace(",", "")
    return out


def main(folder):
    print("| call | kernel | µs | read MB | written MB | DRAM % (ncu) | SM % (ncu) |")
    print("|---|---|---|---|---|---|---|")
    for f in sorted(glob.glob(os.path.join(folder, "*.csv"))):
        tag = os.path.basename(f)[:-4]
        tot_us = tot_mb = 0.0
        for (_, name), m in kernels(f).items():
            us = float(m.get("gpu__time_duration.sum", 0)) / 1e3
            rd = float(m.get("dram__bytes_read.sum", 0)) / 1e6
            wr = float(m.get("dram__bytes_write.sum", 0)) / 1e6
            tot_us += us
            tot_mb += rd + wr
            print(f"| {tag} | {name.split('_kernel')[0]} | {us:.1f} | {rd:.1f} | {wr:.1f} | "
                  f"{m.get('DRAM Throughput', '?')} | {m.get('Compute (SM) Throughput', '?')} |")
        # MB / µs = TB/s
        print(f"| {tag} | **total** | **{tot_us:.1f}** | {tot_mb:.1f} (r+w) | | {tot_mb / tot_us:.2f} TB/s | |")


if __name__ == "__main__":
    main(sys.argv[1])
