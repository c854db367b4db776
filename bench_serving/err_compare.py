"""Compare two records of the GPU tests' oracle errors (the JSON lines tests/test_hopper_gpu.py appends
to $QLA_ERR_LOG): per case, o and state error of the new record over the reference's.

    python bench_serving/err_compare.py NEW.jsonl REF.jsonl [REF2.jsonl ...]

Cases are matched by their "case" tag (a case logged more than once keeps its last record; the
references are merged in order). Prints each matched case's two ratios, then the range and median
of each, how many cases have both errors bit-equal to the reference's, and the cases only one side has. Exit status 0; it reports, the tests judge.
"""
import json
import statistics
import sys


def load(paths):
    got = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                if line.strip():
                    rec = json.loads(line)
                    got[rec["case"]] = rec
    return got


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print(__doc__)
        return 2
    new, ref = load(args[:1]), load(args[1:])
    both = [c for c in new if c in ref and "o_err" in new[c] and "o_err" in ref[c]]
    ratios = {"o": [], "state": []}
    for case in both:
        r_o = new[case]["o_err"] / max(ref[case]["o_err"], 1e-30)
        r_s = new[case]["state_err"] / max(ref[case]["state_err"], 1e-30)
        ratios["o"].append(r_o)
        ratios["state"].append(r_s)
        print(f"{case:48s} o {new[case]['o_err']:.3e} ×{r_o:.2f}   state {new[case]['state_err']:.3e} ×{r_s:.2f}")
    for name, rs in ratios.items():
        if rs:
            print(f"{name}: ×{min(rs):.2f}–{max(rs):.2f}, median ×{statistics.median(rs):.2f} over {len(rs)} cases")
    if both:
        # ×1.00 above is rounded; equal floats say the kernels' outputs were most likely identical
        same = sum(new[c]["o_err"] == ref[c]["o_err"] and new[c]["state_err"] == ref[c]["state_err"] for c in both)
        print(f"errors bit-equal to the reference: {same} of {len(both)} cases")
    only_new = sorted(set(new) - set(ref))
    only_ref = sorted(set(ref) - set(new))
    if only_new:
        print(f"only in the new record ({len(only_new)}): {', '.join(only_new)}")
    if only_ref:
        print(f"only in the reference ({len(only_ref)}): {', '.join(only_ref)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
