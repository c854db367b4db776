"""Stage 1 of the Hopper GDN prefill: per 64-token chunk and value head, the gate cumsum and the
gated, β-scaled WY inverse.

For chunk rows i, j (C = 64), γ = chunk-local cumsum of g, D_ij = e^{γ_i − γ_j} (i ≥ j):
    L  = StrictLower(diag(β) K Kᵀ ⊙ D)
    Aβ = (I + L)⁻¹ diag(β)            (so that U = Aβ (V − diag(e^γ) K S₀))
Outputs: ``gcum [T, HV]`` fp32 (γ per token) and ``a [T, HV, 64]`` (Aβ row of each token, fp16:
the walk's Wᵀ Aβᵀ product takes fp16 operands, see fused_fwd.HALF; before session 42 the input
dtype). Only rows of real tokens are written, and of them only the 16-row blocks on and below the
diagonal (ABETA_PANEL; session 53; a partial chunk's rows too since session 58); the padding of a
sequence's last chunk uses β = 0 and g = 0, so no padded row or column leaks into a real one. The
gate is applied before any exponential sees a positive difference: e^{γ_i − γ_j} is only formed for
i > j (a branch per element; 0 elsewhere).

Work split: one CTA (128 threads, ≤ 128 registers, ~36 KiB shared: 4 CTAs per SM) per (chunk, *key*
head), or per (chunk, part of a key head's value heads) on small grids (see Grid below). K is
loaded once and K Kᵀ (64×64×128, wgmma, fp32 accumulate) is computed once; g and β of all G = HV / H
value heads sharing that key head are loaded together with K and cumsummed at once (one warp per
head). The CTA then walks the G value heads: gated L in registers (K Kᵀ's fragment
layout) → shared → inverse → output staged in shared and written by four TMA stores, one per
16-column panel of its lower blocks (ABETA_PANEL; a sequence's partial last chunk: its real rows, as
16-byte rows). About 12 barriers per value head
(TileLang's sync planner adds one after every mma stage).

The inverse X = (I + L)⁻¹ is computed in fp32 (rounded to fp16 on output; its blocks
enter the merge products as fp16), by blocks of 16 (L_IJ, X_IJ for 16-row blocks I, J = 0..3):

1. Diagonal blocks X_II = (I + L_II)⁻¹: threads 0..63 each own one column of one of the four
   16×16 blocks and forward-substitute it in registers (x_r = δ_rc − Σ_{m<r} L_rm x_m, fully
   unrolled, L read from shared memory as broadcasts; no barrier inside), then store it in fp32;
   all 128 threads then round and scatter the blocks into the merge operands and the output.
   Session 12's ncu (16/32 8192×4) had a seventh of the kernel's stall samples on the barrier
   after this step while the solving warps also did that scattering in 2-byte stores.
2. 16→32 merge, both pairs in one 32×32×32 product on block-diagonal operands:
   X_10 = −X_11 (L_10 X_00),  X_32 = −X_33 (L_32 X_22).
3. 32→64 merge: with X_A = [[X_00, 0], [X_10, X_11]], X_B = [[X_22, 0], [X_32, X_33]] and
   L_C = L[32:64, 0:32]:   X[32:64, 0:32] = −X_B (L_C X_A).
   ([[A, 0], [C, B]]⁻¹ = [[A⁻¹, 0], [−B⁻¹ C A⁻¹, B⁻¹]].)
The merge products (four 32×32×32 GEMMs per value head, tensor-core mma) take fp16 operands, one
pass each, fp32 accumulation (FlashInfer's CollectiveInverse works in fp16 too). With unit-norm
keys every |L| ≤ β ≤ 1 and the inverse's entries stay O(1) (max |X| = 1 on every emulated case, the
equal-key one included), far inside fp16's range, and fp16's 11-bit significand is finer than the
split-bf16 "X-hi" scheme it replaced (sessions 36-39: L and P as bf16 hi + lo, X as its bf16 head, two
passes), whose X rounding was bf16's: CPU emulation (results/h200-session40/exp/kkt_scheme_f16.py)
puts the inverse's worst error at 6.6e-4 against X-hi's 1.9e-3, and Aβ, then rounded to bf16 on output,
at or under X-hi's on every case (worst relative L2 1.68e-3 against 1.75e-3). Half the mma passes,
no lo tiles: 4 fewer 32×32 tiles stored and read per value head. On the H200 (session 41,
results/h200-session41/) kkt_solve went from 159 to 136 µs at 16/32 × 32768 tokens (266 → 224 at
16/64), whole prefills ×0.94–0.98, and every GPU test passed with errors equal to X-hi's or lower
(the correlated-key cases). Keys far outside the model's
domain (norm 2.5-3.5, where β·|k|² > 2 makes the recurrence itself diverge and max |X| reaches
1e13-1e38) give inf here where bf16's range still held finite values. tests/test_kkt_scheme.py
emulates exactly this scheme on the CPU.

Grid: (num_chunks, H · S), 128 threads, where S CTAs share a key head's G value heads when the
host plan splits them (``heads_per_cta`` = G / S, ``kkt_heads_per_cta`` in ``__init__``): a grid of
num_chunks × H CTAs is doubled while the doubled grid still fits one wave (4 CTAs per SM), each CTA
then loading K and forming K Kᵀ for its own value heads (session 38: ×0.88–0.99 on such calls).
Each CTA reads its chunk's first token and its sequence's end from the plan's ``chunk_bounds`` (one
row), so one compiled kernel serves every batch shape and the loads of K, g and β depend on one
table read; where the plan says chunk c starts at token 64·c (``chunks_at_64c``, session 59) it
reads nothing before them. Until session 15 it read (sequence, chunk in it) and then the
sequence's bounds from ``cu_seqlens``: two dependent loads before any data, in a prologue that held
18 % of the kernel's stall samples (session 12's ncu, 16/32 8192×4). Measured in session 15: no
change in speed (0.99–1.02× on 14 rows; other CTAs hid that latency). Session 59 measured the
opposite on the kernel as it is now: one L2 round trip less, kkt_solve ×0.92 at 16/32.
"""

import tilelang
import tilelang.language as T
from tilelang.layout import make_quarter_bank_swizzled_layout

CHUNK = 64
LOG2E = 1.4426950408889634
# Aβ as written to ``a`` (and read by the walk, whose Wᵀ Aβᵀ product takes fp16 operands:
# fused_fwd.HALF; the host allocates ``a`` in this dtype).
A_DTYPE = "float16"
# Aβ is lower-triangular, so ``a`` holds only its 16-row blocks on and below the diagonal (10 of 16,
# 62.5 % of the tile's bytes): four TMA boxes a chunk, one per 16-column panel J holding rows
# 16J..63 of it. The blocks above are never written, and the walk never reads them (its tile keeps
# them zero). Shared tiles of Aβ, here and in the walk, are laid out in these panels (32-byte
# swizzle: a panel's rows are contiguous), so that each box is one contiguous TMA transfer.
ABETA_PANEL = 16
MIN_BLOCKS = 4          # CTAs per SM: caps registers at 128/thread (shared use is ~36 KiB per CTA)
# Fast math: e^x as ex2.approx (the gates' exponentials; relative error ~2⁻²², far below the fp16
# output rounding). Session 12, kkt_solve at 16/32 × 32768 tokens: 0.213 ms → 0.203 with this and
# the bulk store, → 0.188 with step 1's scattering spread over all warps.
PASS_CONFIGS = {tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True}


def build_kkt_solve(H: int, HV: int, K: int, in_dtype: str, use_qk_l2norm: bool,
                    strides: tuple[int, int, int], heads_per_cta: int | None = None):
    """TileLang prim_func for one (H, HV, K, dtype, l2norm) variant; T and chunk count are dynamic.
    ``strides``: token strides of k, g, beta (compile-time, so that loads vectorise).
    ``heads_per_cta``: value heads one CTA walks (default all G = HV / H of its key head). Fewer
    split a key head's value heads over HV / (H · heads_per_cta) CTAs, each loading K and forming
    K Kᵀ itself: more CTAs, shorter serial walks, for grids too small to fill the SMs (the plan's
    choice: ``kkt_heads_per_cta`` in ``__init__``)."""
    C = CHUNK
    B = 16                      # diagonal block (also Aβ's store panel: the four stores below)
    assert B == ABETA_PANEL and C == 4 * B
    Hf = 32                     # merge block
    G = heads_per_cta or HV // H
    S = HV // H // G            # CTAs per (chunk, key head)
    assert G * S * H == HV, (H, HV, heads_per_cta)
    GP = G + (G > 1 and G % 2)  # rows of g_s and b_s (the prologue's loads: whole rounds of 128 threads)
    NT = T.dynamic("num_tokens")
    NC = T.dynamic("num_chunks")
    sk, sg, sb = (int(x) for x in strides)
    accum = "float32"
    half = "float16"            # the merge products' operands (one pass, fp32 accumulation)

    @T.prim_func
    def qla_kkt_solve(
        k: T.StridedTensor((NT, H, K), (sk, K, 1), in_dtype),
        g: T.StridedTensor((NT, HV), (sg, 1), accum),
        beta: T.StridedTensor((NT, HV), (sb, 1), accum),
        chunk_bounds: T.Tensor((NC, 4), "int32"),
        gcum: T.Tensor((NT, HV), accum),
        a: T.Tensor((NT, HV, C), A_DTYPE),
        chunks_at_64c: T.int32,
    ):
        with T.Kernel(NC, H * S, threads=128) as (bc, by):
            bhk = by // S
            hv0 = by * G                                     # this CTA's first value head
            T.annotate_min_blocks_per_sm(MIN_BLOCKS)     # ≤ 128 registers: 4 CTAs (16 warps) per SM
            k_s = T.alloc_shared((C, K), in_dtype)
            g_s = T.alloc_shared((GP, C), accum)             # γ of the G value heads (GP: below)
            b_s = T.alloc_shared((GP, C), accum)
            # L_II and X_II, fp32, a block per row; 16 floats of padding put the two blocks a warp
            # reads (or writes) at once in different banks.
            ld_s = T.alloc_shared((4, B * B + 16), accum)
            xd_s = T.alloc_shared((4, B * B + 16), accum)
            o_s = T.alloc_shared((C, C), A_DTYPE)            # output staging (X · diag(β)), in panels
            # Merge operands, fp16:
            a1h = T.alloc_shared((Hf, Hf), half)             # diag(L_10, L_32)
            b1h = T.alloc_shared((Hf, Hf), half)             # diag(X_00, X_22)
            p1h = T.alloc_shared((Hf, Hf), half)             # diag(L_10 X_00, L_32 X_22)
            a2h = T.alloc_shared((Hf, Hf), half)             # diag(X_11, X_33)
            a3h = T.alloc_shared((Hf, Hf), half)             # L_C = L[32:64, 0:32]
            b3h = T.alloc_shared((Hf, Hf), half)             # X_A = [[X_00, 0], [X_10, X_11]]
            p2h = T.alloc_shared((Hf, Hf), half)             # L_C X_A
            a4h = T.alloc_shared((Hf, Hf), half)             # X_B = [[X_22, 0], [X_32, X_33]]
            kk = T.alloc_fragment((C, C), accum)
            lf = T.alloc_fragment((C, C), accum)
            acc = T.alloc_fragment((Hf, Hf), accum)
            xc = T.alloc_local((B,), accum)
            g_row = T.alloc_fragment((C,), accum)            # γ and β of L's rows, γ of its columns
            b_row = T.alloc_fragment((C,), accum)
            g_col = T.alloc_fragment((C,), accum)

            # In 16-column panels (ABETA_PANEL): each panel's lower rows are one TMA box.
            T.annotate_layout({o_s: make_quarter_bank_swizzled_layout(o_s)})

            tx = T.get_thread_binding()
            # The chunk's first token and its sequence's end. Where every sequence but the last is
            # a whole number of chunks (the host plan's ``chunks_at_64c``: a batch of one sequence,
            # or of 64-multiple lengths), chunk bc starts at token 64·bc and only the last sequence
            # ends before the chunk's end, at num_tokens: no table read, so the loads of K, g and β
            # need nothing before them. A read of chunk_bounds put one L2 round trip ahead of them
            # (session 59, H100: without it kkt_solve ×0.92–0.93 at 16/32, ×0.99 at 16/64).
            bounds = T.alloc_local((2,), "int32")
            if chunks_at_64c != 0:
                bounds[0] = bc * C
                bounds[1] = NT
            else:
                bounds[0] = chunk_bounds[bc, 0]
                bounds[1] = chunk_bounds[bc, 1]
            left = bounds[0]
            nvalid = T.min(bounds[1] - left, C)

            # g, β of all G value heads up front (their latency hides under the K load).
            if GP == G:
                for i, gi in T.Parallel(C, G):
                    g_s[gi, i] = T.if_then_else(i < nvalid, g[left + i, hv0 + gi], 0.0)
                    b_s[gi, i] = T.if_then_else(i < nvalid, beta[left + i, hv0 + gi], 0.0)
            else:
                # An odd G > 1 (16/48: 3) as GP = G + 1 rows, whole rounds of the 128 threads (the
                # padding row stays 0). Filled as G rows, the last round was half the threads, a
                # divergent branch NVCC kept its loads inside: each round's loads waited for the
                # previous round's stores, and K's loads for both (session 59's ncu, H100: 16/48's
                # prologue 33 % of the stall samples against 16/64's 22 %; kkt_solve 209 µs against
                # 16/64's 226 for a quarter fewer value heads). Even G keeps the form above: the same
                # padded form there trips TileLang's sync planner (a barrier it wants inside step
                # 2's diagonal-block branch).
                for i, gi in T.Parallel(C, GP):
                    real = (i < nvalid) & (gi < G)
                    g_s[gi, i] = T.if_then_else(real, g[left + i, hv0 + T.min(gi, G - 1)], 0.0)
                    b_s[gi, i] = T.if_then_else(real, beta[left + i, hv0 + T.min(gi, G - 1)], 0.0)
            T.copy(k[left:left + C, bhk, 0:K], k_s)
            # Blocks that stay zero for every value head.
            T.clear(a1h)
            T.clear(b1h)
            T.clear(a2h)
            T.clear(b3h)
            T.clear(a4h)
            # o_s is not cleared: its blocks above the diagonal are never written here and never
            # stored (the panels below, the partial chunk's lower blocks). Clearing it cost 256 shared
            # wavefronts a CTA, 16 per 16-byte store (its swizzled layout against a row-major fill),
            # ~10 % of the kernel's shared wavefronts (session 58's ncu, 16/32 8192×4; kkt_solve
            # ×0.94–1.03 without it, median ×0.97, on an H100).

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
                    gcum[left + i, hv0 + gi] = g_s[gi, i]

            for gi in T.serial(G):
                bh = hv0 + gi
                # L in registers (kk's layout), then scattered into its consumers: the diagonal
                # blocks in fp32, the merge operands split. The exponential only sees γ_i − γ_j with
                # i > j, inside the one branch that also drops padded rows (0 elsewhere). γ and β
                # come from register fragments loaded once per value head: read from shared memory
                # inside a branch per element, they cost 804 of the kernel's 1775 static SASS
                # instructions (16/32), 470 after. γ is scaled by log2 e as the fragments load it (a
                # product per loaded value, not per element), so e^x is one ex2. With the single
                # branch in place of an exponent mask and a second select pass: 1928 → 1792 SASS
                # instructions (16/32), whole calls ×0.98–1.00 (session 30,
                # h200-session30/kkt-ab-2), errors unchanged.
                for i in T.Parallel(C):
                    g_row[i] = g_s[gi, i] * LOG2E
                    b_row[i] = b_s[gi, i]
                for j in T.Parallel(C):
                    g_col[j] = g_s[gi, j] * LOG2E
                for i, j in T.Parallel(C, C):
                    lf[i, j] = T.if_then_else((i > j) & (i < nvalid),
                                              kk[i, j] * b_row[i] * T.exp2(g_row[i] - g_col[j]), 0.0)
                for i, j in T.Parallel(C, C):
                    lh = T.cast(lf[i, j], half)
                    if i // B == j // B:
                        ld_s[i // B, (i % B) * B + j % B] = lf[i, j]
                    if (i // B == 1) & (j // B == 0):
                        a1h[i - B, j] = lh
                    if (i // B == 3) & (j // B == 2):
                        a1h[i - 2 * B, j - B] = lh
                    if (i >= Hf) & (j < Hf):
                        a3h[i - Hf, j] = lh

                # 1. Diagonal blocks: one thread per column of a 16x16 block forward-substitutes
                #    it in registers and stores it in fp32; then all 128 threads round and scatter
                #    the four blocks into their consumers (the solving warps are the chain: they
                #    do nothing else).
                if tx < 4 * B:
                    blk = tx // B
                    col = tx % B
                    for r in T.unroll(B):
                        xc[r] = T.if_then_else(r == col, 1.0, 0.0)
                        for m in T.unroll(r):
                            xc[r] = xc[r] - ld_s[blk, r * B + m] * xc[m]
                    for r in T.unroll(B):
                        xd_s[blk, r * B + col] = xc[r]
                for bb, r, c in T.Parallel(4, B, B):
                    xv = xd_s[bb, r * B + c]
                    xh = T.cast(xv, half)
                    o_s[bb * B + r, bb * B + c] = T.cast(xv * b_s[gi, bb * B + c], A_DTYPE)
                    if bb % 2 == 0:
                        b1h[(bb // 2) * B + r, (bb // 2) * B + c] = xh
                    else:
                        a2h[(bb // 2) * B + r, (bb // 2) * B + c] = xh
                    if bb < 2:
                        b3h[bb * B + r, bb * B + c] = xh
                    else:
                        a4h[(bb - 2) * B + r, (bb - 2) * B + c] = xh

                # 2. 16 -> 32: diag(L_10 X_00, L_32 X_22), then X_10, X_32 = -X_odd (that).
                T.gemm(a1h, b1h, acc, clear_accum=True)
                for i, j in T.Parallel(Hf, Hf):
                    p1h[i, j] = T.cast(acc[i, j], half)
                T.gemm(a2h, p1h, acc, clear_accum=True)
                for i, j in T.Parallel(Hf, Hf):
                    if i // B == j // B:
                        xv = -acc[i, j]
                        xh = T.cast(xv, half)
                        if i < B:       # X_10 -> rows 16..31, cols 0..15
                            o_s[B + i, j] = T.cast(xv * b_s[gi, j], A_DTYPE)
                            b3h[B + i, j] = xh
                        else:           # X_32 -> rows 48..63, cols 32..47
                            o_s[Hf + i, B + j] = T.cast(xv * b_s[gi, B + j], A_DTYPE)
                            a4h[i, j - B] = xh

                # 3. 32 -> 64: X[32:64, 0:32] = -X_B (L_C X_A).
                T.gemm(a3h, b3h, acc, clear_accum=True)
                for i, j in T.Parallel(Hf, Hf):
                    p2h[i, j] = T.cast(acc[i, j], half)
                T.gemm(a4h, p2h, acc, clear_accum=True)
                for i, j in T.Parallel(Hf, Hf):
                    o_s[Hf + i, j] = T.cast(-acc[i, j] * b_s[gi, j], A_DTYPE)

                if nvalid == C:
                    # A whole chunk: Aβ's blocks on and below the diagonal (ABETA_PANEL), one TMA
                    # store per 16-column panel J, its rows 16J..63.
                    # (Four statements: a TileLang loop would make the boxes' extents symbolic.)
                    T.tma_copy(o_s[0:C, 0:B], a[left:left + C, bh, 0:B])
                    T.tma_copy(o_s[B:C, B:2 * B], a[left + B:left + C, bh, B:2 * B])
                    T.tma_copy(o_s[2 * B:C, 2 * B:3 * B], a[left + 2 * B:left + C, bh, 2 * B:3 * B])
                    T.tma_copy(o_s[3 * B:C, 3 * B:C], a[left + 3 * B:left + C, bh, 3 * B:C])
                    T.tma_store_wait(0)
                else:               # a sequence's last, partial chunk: its real rows' lower blocks
                    for i, j in T.Parallel(C, C):
                        if (i < nvalid) & (i // B >= j // B):
                            a[left + i, bh, j] = o_s[i, j]

    return qla_kkt_solve
