"""Write copies of the RS walk kernel (kernels/hopper/fused_fwd.py) with one stage left
out, to place the walk's time by difference when hardware counters are not available (the device
notes' advice: "time variants that leave one stage out or do it twice, and take differences").

    python bench_serving/walk_ablations.py FUSED_FWD.py OUTDIR       # writes OUTDIR/<name>.py
    bash bench_serving/kernel_ab.sh OUT nowp=OUTDIR/nowp.py ...      # AB_TESTS=0: outputs are wrong

Variants (every one but ``fast`` and ``fastp`` computes wrong results by design; time them, never test them):
  nowp      WG_P makes no P (its barriers still run): is WG_P the throughput limit? (Before session 11's
            walk WG_P also made −Wₖ; the consumers form W themselves now.)
  noout     the consumer skips Uᵀ Pᵀ (and its wait for P) and the O tile write: the output's share of
            the chain (X Qᵀ rides in the X [Kᵀ | Qᵀ] product since session 42 and stays)
  noostore  only the transposed Oᵀ → O-tile write (stmatrix) is skipped (shared-memory store cost)
  noupdate  the state update GEMM is skipped (X only decays): the chain's last GEMM
  fast      TileLang fast math (approximate exp): a real candidate, accuracy to be checked by the tests
  fastp     only P's decay mask uses the fast __expf (32 accurate expf a WG_P thread per chunk were
            322 of WG_P's 681 SASS instructions in the loop, static count at 16/32, V-block 64;
            session 7 measured ×0.99–1.00; since session 33 the mask is exp2f of log2e-scaled γ):
            a real candidate too
Each edit is an exact text replacement; a missing pattern stops the script (the kernel changed).
"""
import argparse
import os
import sys

_WP_START = ("                        T.gemm(kq_s[b, C:2 * C, :], kq_s[b, 0:C, :], p, transpose_B=True, "
             "clear_accum=True)\n")
_WP_END = "                        T.fence_proxy_async()\n                        T.barrier_arrive(p_ready[b])\n"
_OUT_START = ("                if with_output:\n"
              "                    T.barrier_wait(p_ready[b], (u // 2) % 2)    # P of this chunk (WG_P)\n")
_OUT_END = "                    T.gemm(ub, p_s[b, :, :], oT, transpose_B=True, clear_accum=False)\n"
_OSTORE = "                    store_ot(w, un, o_s)\n"     # stmatrix.trans since session 43
_UPDATE = "                T.gemm(un, kq_s[b, 0:C, :], X, clear_accum=False)\n"
_FAST = "PASS_CONFIGS = {tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: False,"
_PEXP = "T.exp2(T.if_then_else(j <= i, g_row[i] - g_col[j], 0.0))"   # γ scaled by log2 e (session 33)


def _cut(src: str, start: str, end: str, keep_end: bool) -> str:
    a = src.index(start)
    b = src.index(end, a)
    return src[:a] + (src[b:] if keep_end else src[b + len(end):])


def variants(src: str) -> dict[str, str]:
    for pat in (_WP_START, _WP_END, _OUT_START, _OUT_END, _OSTORE, _UPDATE, _FAST, _PEXP):
        if src.count(pat) != 1:
            raise ValueError(f"pattern found {src.count(pat)} times, expected once: {pat.strip()[:70]!r}")
    return {
        "nowp": _cut(src, _WP_START, _WP_END, keep_end=True),
        "noout": _cut(src, _OUT_START, _OUT_END, keep_end=False).replace(_OSTORE, ""),
        "noostore": src.replace(_OSTORE, ""),
        "noupdate": src.replace(_UPDATE, ""),
        "fast": src.replace(_FAST, _FAST.replace("False", "True")),
        # 2^x = e^{x ln 2}: the fast __expf on the log2e-scaled argument
        "fastp": src.replace(_PEXP, 'T.call_extern("float32", "__expf", '
                             + _PEXP.removeprefix("T.exp2(").removesuffix(")") + " * 0.6931471805599453)"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernel", help="the RS walk's fused_fwd.py")
    ap.add_argument("outdir")
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    for name, text in variants(open(args.kernel).read()).items():
        with open(os.path.join(args.outdir, f"{name}.py"), "w") as f:
            f.write(text)
        print(os.path.join(args.outdir, f"{name}.py"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
