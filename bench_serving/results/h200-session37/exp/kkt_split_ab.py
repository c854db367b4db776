"""kkt_solve with a key head's value heads split over several CTAs (``exp/kkt-head-split.patch``:
``QLA_KKT_HEADS_PER_CTA``), against the checkout's one CTA per (chunk, key head), interleaved in one
process. Aimed at the rows whose kkt grid (chunks × key heads) is too small to fill the H200: 2/8
and 4/16 with 128 chunks or fewer (2/8 1024×8, 16×512, 64×128 are issue 3 (a)'s last misses, 0.80–0.83
on GPU time). First a check that every split gives bit-identical outputs and final states (same
math per value head, only the CTA that does it changes); then rounds of GPU-busy time of the whole
call and of kkt_solve alone, per label, the order alternating. Run from a checkout with the patch:

    python bench_serving/results/h200-session37/exp/kkt_split_ab.py [--rounds 6] > $OUT/kkt_split_ab.txt
"""
import argparse
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import kernel_bench as kb  # noqa: E402
from qla_serve.kernels import hopper  # noqa: E402

ROWS = [(2, 8, "1024x8"), (2, 8, "16x512"), (2, 8, "64x128"), (2, 8, "1x2048"), (2, 8, "1x8192"),
        (2, 8, "7000+600+300+200+92"), (2, 8, "1x16384"), (4, 16, "1x2048"), (4, 16, "16x512"),
        (4, 16, "1024x8"), (16, 32, "1024x8")]


def use(label: str) -> None:
    if label == "all":
        os.environ.pop(hopper.KKT_HEADS_ENV, None)
    else:
        os.environ[hopper.KKT_HEADS_ENV] = label
    hopper._form_kernels.clear()        # the kernels a call form runs are kept per form


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    print("heads mix | label: GPU-busy ms whole call, kkt_solve alone (median of rounds) | whole-call ratio to 'all'")
    for H, HV, mix in ROWS:
        G = HV // H
        labels = ["all"] + [str(s) for s in (G // 2, 1) if 1 <= s < G and G % s == 0]
        labels = list(dict.fromkeys(labels))
        x = kb.make_inputs(kb.mix_seqlens(mix), H, HV)
        kernel, _ = kb.qla_fns(x)
        pool0 = x["pool"].clone()
        got = {}
        for lab in labels:              # correctness: the same call from the same pool, per label
            use(lab)
            x["pool"].copy_(pool0)
            kernel()
            torch.cuda.synchronize()
            got[lab] = (kernel.out.clone(), x["pool"].clone())
        same = {lab: bool(torch.equal(got[lab][0], got["all"][0]) and torch.equal(got[lab][1], got["all"][1]))
                for lab in labels}
        gpu = {lab: [] for lab in labels}
        kkt = {lab: [] for lab in labels}
        for r in range(args.rounds):
            for lab in (labels if r % 2 == 0 else labels[::-1]):
                use(lab)
                gpu[lab].append(kb.gpu_ms(kernel, reps=20))
                hopper._skip.add("fwd")
                try:
                    kkt[lab].append(kb.gpu_ms(kernel, reps=20))
                finally:
                    hopper._skip.discard("fwd")
        use("all")
        base = statistics.median(gpu["all"])
        print(f"{H}/{HV} {mix} | " + "; ".join(
            f"{lab}: {statistics.median(gpu[lab]):.4f}, {statistics.median(kkt[lab]):.4f}"
            f"{'' if same[lab] else ' (OUTPUT DIFFERS)'}" for lab in labels) + " | " + ", ".join(
            f"{lab} x{statistics.median(gpu[lab]) / base:.3f}" for lab in labels[1:]), flush=True)


if __name__ == "__main__":
    main()
