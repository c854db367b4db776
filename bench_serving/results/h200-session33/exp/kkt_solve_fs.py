"""Stage 1 of the Hopper GDN prefill: per 64-token chunk and value head, the gate cumsum and the
gated, β-scaled WY inverse.

For chunk rows i, j (C = 64), γ = chunk-local cumsum of g, D_ij = e^{γ_i − γ_j} (i ≥ j):
    L  = StrictLower(diag(β) K Kᵀ ⊙ D)
    Aβ = (I + L)⁻¹ diag(β)            (so that U = Aβ (V − diag(e^γ) K S₀))
Outputs: ``gcum [T, HV]`` fp32 (γ per token) and ``a [T, HV, 64]`` (Aβ row of each token, input
dtype). Only rows of real tokens are written; the padding of a sequence's last chunk uses β = 0 and
g = 0, so no padded row or column leaks into a real one. The gate is applied before any exponential
sees a positive difference: e^{γ_i − γ_j} is only formed for i > j (a branch per element; 0
elsewhere).

Work split: one CTA (128 threads, ≤ 128 registers, 4 CTAs per SM) per (chunk, *key* head). K is
loaded once and K Kᵀ (64×64×128, wgmma, fp32 accumulate) is computed once; g and β of all
G = HV / H value heads sharing that key head are loaded with K and cumsummed at once. The CTA then
takes the G value heads two at a time.

The inverse X = (I + L)⁻¹ is one fp32 forward substitution per column on CUDA cores, with every
operand but L in registers (no tensor-core merges, no operand scatter, no shared round trip of X):
1. All 128 threads form the gated L of both heads in K Kᵀ's fragment and store Lᵀ in fp32 to shared
   memory, row m of Lᵀ = column m of L, with L's rows permuted so that the even rows come first and
   the odd ones 36 floats later (the two halves of a warp read their own 16-byte vectors in
   different banks); rows are 76 floats long, which makes the fragment's stores conflict-free.
2. Each thread owns one column c of X for each of the two heads, split by row parity with its
   partner lane (lane ± 16): lane l holds rows 2j + l // 16 of column 16·group + l % 16. It solves
   right-looking: acc = e_c; for m = group·16 … 63: x_m = acc_m (taken from the lane that holds row
   m by one shuffle), acc_r −= L_rm x_m for its rows r > m (L_rm read as 16-byte broadcast vectors).
   Columns c < 16·group start at m = 16·group: x_m = 0 above the diagonal, so the skipped steps are
   zero work, not an approximation. Warp w takes column group w of the first head and 3 − w of the
   second, so the four warps (and the four SM sub-partitions they issue on) carry about equal
   work: the first column group runs all 64 steps, the last only 16.
3. Each thread writes its rows of Aβ's column c (× β_c, rounded to the input dtype) straight from
   registers; a warp's store covers 16 consecutive columns of two rows.
Two barriers per pair of value heads (the planner's): after L is stored, after it is read.
This replaced (session 33) a 16×16-block scheme whose 32→64 merges ran as split-bf16 tensor-core
products through shared memory: that kernel was bound by shared-memory traffic (the operand
scatter and the merges' fragment loads, session 23's ncu). tests/test_kkt_scheme.py emulates this
scheme on the CPU.

Grid: (num_chunks, H), 128 threads. Each CTA reads its chunk's first token and its sequence's end
from the plan's ``chunk_bounds`` (one row), so one compiled kernel serves every batch shape.
"""

import tilelang
import tilelang.language as T

CHUNK = 64
LOG2E = 1.4426950408889634
MIN_BLOCKS = 4          # CTAs per SM: caps registers at 128/thread
LT_ODD = 36             # offset of L's odd rows inside a row of Lᵀ (32 even rows + 4 floats of skew)
LT_ROW = 76             # floats per row of Lᵀ: 16-byte rows; the fragment's stores hit distinct banks
# Fast math: e^x as ex2.approx (the gates' exponentials; relative error ~2⁻²², far below the bf16
# output rounding).
PASS_CONFIGS = {tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True}


def build_kkt_solve(H: int, HV: int, K: int, in_dtype: str, use_qk_l2norm: bool,
                    strides: tuple[int, int, int]):
    """TileLang prim_func for one (H, HV, K, dtype, l2norm) variant; T and chunk count are dynamic.
    ``strides``: token strides of k, g, beta (compile-time, so that loads vectorise)."""
    C = CHUNK
    G = HV // H
    NPAIR = (G + 1) // 2
    NT = T.dynamic("num_tokens")
    NC = T.dynamic("num_chunks")
    sk, sg, sb = (int(x) for x in strides)
    accum = "float32"

    @T.prim_func
    def qla_kkt_solve(
        k: T.StridedTensor((NT, H, K), (sk, K, 1), in_dtype),
        g: T.StridedTensor((NT, HV), (sg, 1), accum),
        beta: T.StridedTensor((NT, HV), (sb, 1), accum),
        chunk_bounds: T.Tensor((NC, 4), "int32"),
        gcum: T.Tensor((NT, HV), accum),
        a: T.Tensor((NT, HV, C), in_dtype),
    ):
        with T.Kernel(NC, H, threads=128) as (bc, bhk):
            T.annotate_min_blocks_per_sm(MIN_BLOCKS)
            k_s = T.alloc_shared((C, K), in_dtype)
            g_s = T.alloc_shared((G, C), accum)              # γ of the G value heads
            b_s = T.alloc_shared((G, C), accum)
            lt_s = T.alloc_shared((2, C, LT_ROW), accum)     # Lᵀ of two value heads (see step 1)
            kk = T.alloc_fragment((C, C), accum)
            g_row = T.alloc_fragment((C,), accum)            # γ and β of L's rows, γ of its columns
            b_row = T.alloc_fragment((C,), accum)
            g_col = T.alloc_fragment((C,), accum)
            acc = T.alloc_local((C // 2,), accum)            # this lane's rows of its column of X
            lv = T.alloc_local((4,), accum)
            xm = T.alloc_local((1,), accum)

            tx = T.get_thread_binding()
            warp = tx // 32
            lane = tx % 32
            col = lane % 16                                  # column within the warp's group
            par = lane // 16                                 # row parity held by this lane
            left = chunk_bounds[bc, 0]
            nvalid = T.min(chunk_bounds[bc, 1] - left, C)

            # g, β of all G value heads up front (their latency hides under the K load).
            for i, gi in T.Parallel(C, G):
                g_s[gi, i] = T.if_then_else(i < nvalid, g[left + i, bhk * G + gi], 0.0)
                b_s[gi, i] = T.if_then_else(i < nvalid, beta[left + i, bhk * G + gi], 0.0)
            T.copy(k[left:left + C, bhk, 0:K], k_s)

            if use_qk_l2norm:
                kf = T.alloc_fragment((C, K), accum)
                ksq = T.alloc_fragment((C, K), accum)
                rn = T.alloc_fragment((C,), accum)
                T.copy(k_s, kf)
                for i, j in T.Parallel(C, K):
                    ksq[i, j] = kf[i, j] * kf[i, j]
                T.reduce_sum(ksq, rn, dim=1)
                for i, j in T.Parallel(C, K):
                    kf[i, j] = kf[i, j] * T.rsqrt(rn[i] + 1e-6)
                T.copy(kf, k_s)

            T.gemm(k_s, k_s, kk, transpose_B=True, clear_accum=True)
            T.cumsum(src=g_s, dst=g_s, dim=1)
            for i, gi in T.Parallel(C, G):
                if i < nvalid:
                    gcum[left + i, bhk * G + gi] = g_s[gi, i]

            for pair in T.serial(NPAIR):
                # 1. Lᵀ of heads 2·pair (+ 1) in shared memory. The exponential only sees γ_i − γ_j
                #    with i > j, inside the one branch that also drops padded rows; γ is scaled by
                #    log2 e as the fragments load it, so e^x is one ex2.
                for hs in T.serial(2):
                    gi = pair * 2 + hs
                    if gi < G:
                        for i in T.Parallel(C):
                            g_row[i] = g_s[gi, i] * LOG2E
                            b_row[i] = b_s[gi, i]
                        for j in T.Parallel(C):
                            g_col[j] = g_s[gi, j] * LOG2E
                        for i, j in T.Parallel(C, C):
                            lt_s[hs, j, (i % 2) * LT_ODD + i // 2] = T.if_then_else(
                                (i > j) & (i < nvalid),
                                kk[i, j] * b_row[i] * T.exp2(g_row[i] - g_col[j]), 0.0)

                # 2.–3. Per thread: column 16·grp + col of X, rows of parity par, right-looking.
                for hs in T.serial(2):
                    gi = pair * 2 + hs
                    grp = T.if_then_else(hs == 0, warp, 3 - warp)
                    c = grp * 16 + col
                    if gi < G:
                        for j in T.unroll(C // 2):
                            acc[j] = T.if_then_else(j * 2 + par == c, 1.0, 0.0)
                        for mb in T.unroll(4):
                            if mb >= grp:                # warp-uniform: x_m = 0 for m < 16·grp
                                for mm in T.unroll(16):
                                    # x_m lives in row m // 2 of the lane with parity m % 2
                                    xm[0] = T.shfl_sync(acc[mb * 8 + mm // 2], col + (mm % 2) * 16)
                                    for q in T.unroll(8):
                                        if q * 4 + 3 >= mb * 8 + mm // 2:   # rows ≤ m hold L = 0
                                            for e in T.vectorized(4):
                                                lv[e] = lt_s[hs, mb * 16 + mm, par * LT_ODD + q * 4 + e]
                                            for e in T.unroll(4):
                                                acc[q * 4 + e] = acc[q * 4 + e] - lv[e] * xm[0]
                        bsc = b_s[gi, c]
                        for j in T.unroll(C // 2):
                            if j * 2 + par < nvalid:
                                a[left + j * 2 + par, bhk * G + gi, c] = T.cast(acc[j] * bsc, in_dtype)

    return qla_kkt_solve
