"""Session 18: the CP sweep's variants (kernels.py _safe_build: Variant(H, HV, K, V, block_v)) for
heads 2/8 and 16/32 at both V-blocks, exact and tail-start partials, into $TILELANG_CACHE_DIR."""
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
import multiprocessing as mp


def build(args):
    tail, H, HV, bv = args
    os.environ["QLA_CP_TAIL"] = tail
    from qla_serve.kernels import hopper
    t = time.time()
    hopper.build_variant(hopper.Variant(H, HV, 128, 128, block_v=bv))
    return f"tail={tail} {H}/{HV} bv={bv} {time.time() - t:.0f}s"


if __name__ == "__main__":
    jobs = [(t, H, HV, bv) for t in ("0", "1") for H, HV in ((2, 8), (16, 32)) for bv in (64, 128)]
    with ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as ex:
        for r in ex.map(build, jobs):
            print(r, flush=True)
