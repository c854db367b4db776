"""Stage 1 of the Hopper GDN prefill: per 64-token chunk and value head, the gate cumsum and the
gated, β-scaled WY inverse.

For chunk rows i, j (C = 64), γ = chunk-local cumsum of g, D_ij = e^{γ_i − γ_j} (i ≥ j):
    L  = StrictLower(diag(β) K Kᵀ ⊙ D)
    Aβ = (I + L)⁻¹ diag(β)            (so that U = Aβ (V − diag(e^γ) K S₀))
Outputs: ``gcum [T, HV]`` fp32 (γ per token) and ``a [T, HV, 64]`` (Aβ row of each token, input
dtype). Only rows of real tokens are written; the padding of a sequence's last chunk uses β = 0 and
g = 0, so no padded row or column leaks into a real one.

The inverse is taken in fp32: the four 16×16 diagonal blocks by forward substitution (in parallel),
then each 16-row block below the diagonal by block forward substitution
(X_IJ = −X_II · Σ_{M<I} L_IM X_MJ).

Grid: (num_chunks, HV), 128 threads. Sequence boundaries come from the plan's ``chunk_indices``
and ``cu_seqlens`` (device tables), so one compiled kernel serves every batch shape.
"""

import tilelang
import tilelang.language as T

CHUNK = 64
PASS_CONFIGS = {tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: False}


def build_kkt_solve(H: int, HV: int, K: int, in_dtype: str, use_qk_l2norm: bool,
                    strides: tuple[int, int, int]):
    """TileLang prim_func for one (H, HV, K, dtype, l2norm) variant; T and chunk count are dynamic.
    ``strides``: token strides of k, g, beta (compile-time, so that loads vectorise)."""
    C = CHUNK
    G = HV // H
    NT = T.dynamic("num_tokens")
    NS = T.dynamic("num_seqs")
    NC = T.dynamic("num_chunks")
    sk, sg, sb = (int(x) for x in strides)
    accum = "float32"

    @T.prim_func
    def qla_kkt_solve(
        k: T.StridedTensor((NT, H, K), (sk, K, 1), in_dtype),
        g: T.StridedTensor((NT, HV), (sg, 1), accum),
        beta: T.StridedTensor((NT, HV), (sb, 1), accum),
        cu_seqlens: T.Tensor((NS + 1,), "int32"),
        chunk_indices: T.Tensor((NC, 2), "int32"),
        gcum: T.Tensor((NT, HV), accum),
        a: T.Tensor((NT, HV, C), in_dtype),
    ):
        with T.Kernel(NC, HV, threads=128) as (bc, bh):
            k_s = T.alloc_shared((C, K), in_dtype)
            g_s = T.alloc_shared((C,), accum)
            b_s = T.alloc_shared((C,), accum)
            l_s = T.alloc_shared((C, C), accum)
            x_s = T.alloc_shared((C, C), accum)
            r_s = T.alloc_shared((16, C), accum)
            kk = T.alloc_fragment((C, C), accum)
            row = T.alloc_fragment((4, 16), accum)
            acc = T.alloc_fragment((16, C), accum)
            acc2 = T.alloc_fragment((16, C), accum)
            out_f = T.alloc_fragment((C, C), accum)

            seq = chunk_indices[bc, 0]
            left = cu_seqlens[seq] + chunk_indices[bc, 1] * C
            nvalid = T.min(cu_seqlens[seq + 1] - left, C)

            T.copy(k[left:left + C, bh // G, 0:K], k_s)
            for i in T.Parallel(C):
                g_s[i] = T.if_then_else(i < nvalid, g[left + i, bh], 0.0)
                b_s[i] = T.if_then_else(i < nvalid, beta[left + i, bh], 0.0)
            T.cumsum(src=g_s, dst=g_s, dim=0)
            for i in T.Parallel(C):
                if i < nvalid:
                    gcum[left + i, bh] = g_s[i]

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
            for i, j in T.Parallel(C, C):
                l_s[i, j] = T.if_then_else(
                    (i > j) & (i < nvalid), kk[i, j] * b_s[i] * T.exp(g_s[i] - g_s[j]), 0.0)
            for i, j in T.Parallel(C, C):
                x_s[i, j] = T.if_then_else(i == j, 1.0, 0.0)

            # Diagonal 16x16 blocks, all four at once: X[r] = e_r − Σ_{m<r} L[r, m] X[m].
            for r in T.serial(1, 16):
                for b, c in T.Parallel(4, 16):
                    row[b, c] = T.if_then_else(c == r, 1.0, 0.0)
                for m in T.serial(r):
                    for b, c in T.Parallel(4, 16):
                        row[b, c] -= l_s[b * 16 + r, b * 16 + m] * x_s[b * 16 + m, b * 16 + c]
                for b, c in T.Parallel(4, 16):
                    x_s[b * 16 + r, b * 16 + c] = row[b, c]

            # Row blocks below the diagonal, top to bottom.
            for I in T.unroll(1, 4):
                W = I * 16
                for r, c in T.Parallel(16, C):
                    acc[r, c] = 0.0
                for m in T.serial(W):
                    for r, c in T.Parallel(16, C):
                        if c < W:
                            acc[r, c] += l_s[W + r, m] * x_s[m, c]
                T.copy(acc, r_s)
                for r, c in T.Parallel(16, C):
                    acc2[r, c] = 0.0
                for p in T.serial(16):
                    for r, c in T.Parallel(16, C):
                        if c < W:
                            acc2[r, c] -= x_s[W + r, W + p] * r_s[p, c]
                for r, c in T.Parallel(16, C):
                    if c < W:
                        x_s[W + r, c] = acc2[r, c]

            for i, j in T.Parallel(C, C):
                out_f[i, j] = x_s[i, j] * b_s[j]
            for i, j in T.Parallel(C, C):
                if i < nvalid:
                    a[left + i, bh, j] = out_f[i, j]

    return qla_kkt_solve
