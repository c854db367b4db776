"""CP tail starts: how many chunks each partial partition's phase 1 walks, in one launch.

For partial partition r and value head h, w[r, h] is the fewest chunks, counted back from the
partition's end, whose summed decay reaches −``log_decay`` (0 where none of the first
``max_chunks`` do): see "Tail starts" in :mod:`cp`. The inputs are kkt_solve's ``gcum`` (chunk-local
cumsum of g, so its value at a chunk's last token is the chunk's decay) and the chunk-end table
``tail_ends [NSP, W]`` of ``cp.build_tables(..., tail=True)`` (−1 past a partition's chunks).

:func:`cp.tail_chunks` computes the same with ~15 torch ops. On the H200 those cost 0.35–0.5 ms of
host time per call (session 18's profile), more than the tail-start partials save on the GPU
(60–510 µs → 8–35 µs of phase 1): this kernel replaces them with one launch (session 19: 2.2 µs
of GPU time a call, and a tail-start call's host time equal to an exact one's).

Grid (NSP, HV), ``max_chunks`` threads: thread j loads the decay of chunk j back from the end, an
inclusive scan over j, the first j whose sum is ≤ −log_decay (a min-reduction over candidates, so
no assumption that the sums fall monotonically), w = j + 1.
"""

import tilelang
import tilelang.language as T

PASS_CONFIGS = {tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: False}


def build_cp_tail_scan(HV: int, log_decay: float, max_chunks: int):
    """TileLang prim_func ``(gcum [NT, HV] f32, tail_ends [NSP, W] i32, tail [NSP, HV] i32)``,
    W ≤ ``max_chunks`` (dynamic, as are NT and NSP)."""
    NT = T.dynamic("num_tokens")
    NSP = T.dynamic("num_partials")
    W = T.dynamic("tail_width")
    WM = max_chunks
    limit = -float(log_decay)

    @T.prim_func
    def qla_cp_tail_scan(
        gcum: T.Tensor((NT, HV), "float32"),
        tail_ends: T.Tensor((NSP, W), "int32"),
        tail: T.Tensor((NSP, HV), "int32"),
    ):
        with T.Kernel(NSP, HV, threads=WM) as (r, h):
            decay = T.alloc_shared((WM,), "float32")
            cand = T.alloc_fragment((WM,), "int32")
            best = T.alloc_fragment((1,), "int32")
            for j in T.Parallel(WM):
                # indices clamped into range: both branches of a select may be evaluated
                e = tail_ends[r, T.min(j, W - 1)]
                decay[j] = T.if_then_else((j < W) & (e >= 0), gcum[T.max(e, 0), h], T.float32(0))
            T.cumsum(decay, dim=0)
            for j in T.Parallel(WM):
                cand[j] = T.if_then_else(decay[j] <= limit, j, WM)
            T.reduce_min(cand, best, dim=0)
            for i in T.Parallel(1):
                tail[r, h] = T.if_then_else(best[i] < WM, best[i] + 1, 0)

    return qla_cp_tail_scan
