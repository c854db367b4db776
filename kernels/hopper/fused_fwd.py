"""Stage 2 of the Hopper GDN prefill: the state walk and the output, fused, reading and writing the
engine's state pool by index.

One CTA per (V block, value head, sequence) walks the sequence's chunks in order, the running state
S (its [BV, K] or [K, BV] slice) in fp32 registers. Per chunk, with Q, K [64, K], V [64, BV],
Aβ and γ from :mod:`kkt_solve` (bf16 tensor-core operands, fp32 accumulators):
    W = V − diag(e^γ) K S                    (S rounded to the input dtype for the product)
    U = Aβ W
    O = scale · [diag(e^γ) Q S + (Q Kᵀ ⊙ D_incl) U]
    S ← e^{γ_C} S + Kᵀ diag(e^{γ_C − γ}) U
Only differences γ_i − γ_j ≤ 0 are exponentiated. W, U, S never touch HBM.

Pool handling: ``slot = state_indices[n]``; ``slot < 0`` or ``slot == null_slot`` → zero output,
no pool access. Otherwise S starts from ``pool[slot]`` (or zero when ``has_initial_state[n]`` is
0: no memset) and the final S is written back to ``pool[slot]`` in the pool's dtype. The pool may
have any ``stride(0)``; q/k/v/out/g any token stride (last dim contiguous).

Grid: (V / BV, HV, N). T and N are dynamic; BV comes from the host plan.
"""

import tilelang
import tilelang.language as T

CHUNK = 64
PASS_CONFIGS = {tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: False}


def build_fused_fwd(H: int, HV: int, K: int, V: int, block_v: int, in_dtype: str, pool_dtype: str,
                    state_layout: str, use_qk_l2norm: bool, read_has_initial_state: bool,
                    scale: float, strides: tuple[int, int, int, int], pipelined: bool = True):
    """TileLang prim_func for one variant. ``state_layout``: "vk" (pool [slots, HV, V, K]) or "kv".

    ``strides``: token strides of q, k, v, out (elements). They are compile-time so that loads and
    stores vectorise (an engine's q/k/v views of its packed qkv buffer have one fixed stride per
    model). ``pipelined``: prefetch the next chunk's inputs while computing the current one."""
    C = CHUNK
    G = HV // H
    BV = block_v
    NV = V // BV
    threads = 256 if BV >= 128 else 128
    vk = state_layout == "vk"
    NT = T.dynamic("num_tokens")
    NS = T.dynamic("num_seqs")
    NP = T.dynamic("num_slots")
    sq, sk, sv, so = (int(x) for x in strides)
    sp = T.dynamic("stride_pool")
    accum = "float32"
    pool_shape = (NP, HV, V, K) if vk else (NP, HV, K, V)
    s_shape = (BV, K) if vk else (K, BV)

    @T.macro
    def l2norm_rows(x_s, xf, xsq, rn):
        T.copy(x_s, xf)
        for i, j in T.Parallel(C, K):
            xsq[i, j] = xf[i, j] * xf[i, j]
        T.reduce_sum(xsq, rn, dim=1)
        for i, j in T.Parallel(C, K):
            xf[i, j] = xf[i, j] * T.rsqrt(rn[i] + 1e-6)
        T.copy(xf, x_s)

    @T.macro
    def load_state(pool, slot, bh, v0, S):
        if vk:
            T.copy(pool[slot, bh, v0:v0 + BV, 0:K], S)
        else:
            T.copy(pool[slot, bh, 0:K, v0:v0 + BV], S)

    @T.macro
    def chunk_step(c, bos, eos, bh, v0, q, k, v, a, gcum, out, q_s, k_s, v_s, a_s, g_s, s_s, w_s, u_s, p_s,
                   S, ks, u, o, p):
        left = bos + c * C
        nvalid = T.min(eos - bos - c * C, C)
        T.copy(q[left:left + C, bh // G, 0:K], q_s)
        T.copy(k[left:left + C, bh // G, 0:K], k_s)
        T.copy(v[left:left + C, bh, v0:v0 + BV], v_s)
        T.copy(a[left:left + C, bh, 0:C], a_s)
        T.copy(gcum[left:left + C, bh], g_s)
        # Rows ≥ nvalid hold the next sequence's (finite) data or zeros: every use
        # below masks them, and only e^{γ_C − γ_i} with i < nvalid is formed.
        glast = g_s[nvalid - 1]
        if use_qk_l2norm:
            xf = T.alloc_fragment((C, K), accum)
            xsq = T.alloc_fragment((C, K), accum)
            rn = T.alloc_fragment((C,), accum)
            l2norm_rows(q_s, xf, xsq, rn)
            l2norm_rows(k_s, xf, xsq, rn)
        T.copy(S, s_s)

        # W = V − e^γ ⊙ (K S)
        if vk:
            T.gemm(k_s, s_s, ks, transpose_B=True, clear_accum=True)
        else:
            T.gemm(k_s, s_s, ks, clear_accum=True)
        for i, j in T.Parallel(C, BV):
            ks[i, j] = v_s[i, j] - T.exp(g_s[i]) * ks[i, j]
        T.copy(ks, w_s)
        # U = Aβ W
        T.gemm(a_s, w_s, u, clear_accum=True)
        T.copy(u, u_s)
        # P = scale · (Q Kᵀ ⊙ D_incl)
        T.gemm(q_s, k_s, p, transpose_B=True, clear_accum=True)
        for i, j in T.Parallel(C, C):
            p[i, j] = T.if_then_else((j <= i) & (i < nvalid), p[i, j] * (scale * T.exp(g_s[i] - g_s[j])), 0.0)
        T.copy(p, p_s)
        # O = scale · e^γ ⊙ (Q S) + P U
        if vk:
            T.gemm(q_s, s_s, o, transpose_B=True, clear_accum=True)
        else:
            T.gemm(q_s, s_s, o, clear_accum=True)
        for i, j in T.Parallel(C, BV):
            o[i, j] = T.if_then_else(i < nvalid, o[i, j] * (scale * T.exp(g_s[i])), 0.0)
        T.gemm(p_s, u_s, o, clear_accum=False)
        for i, j in T.Parallel(C, BV):
            if i < nvalid:
                out[left + i, bh, v0 + j] = o[i, j]
        # S ← e^{γ_C} S + Kᵀ (e^{γ_C − γ} ⊙ U)
        for i, j in T.Parallel(C, BV):
            u[i, j] = T.if_then_else(i < nvalid, u[i, j] * T.exp(glast - g_s[i]), 0.0)
        T.copy(u, w_s)
        if vk:
            for i, j in T.Parallel(BV, K):
                S[i, j] = S[i, j] * T.exp(glast)
            T.gemm(w_s, k_s, S, transpose_A=True, clear_accum=False)
        else:
            for i, j in T.Parallel(K, BV):
                S[i, j] = S[i, j] * T.exp(glast)
            T.gemm(k_s, w_s, S, transpose_A=True, clear_accum=False)

    @T.macro
    def zero_rows(nchunks, bos, eos, bh, v0, out):
        for c in T.serial(nchunks):
            for i, j in T.Parallel(C, BV):
                if bos + c * C + i < eos:
                    out[bos + c * C + i, bh, v0 + j] = T.cast(0, in_dtype)

    @T.macro
    def store_state(pool, slot, bh, v0, S):
        if vk:
            T.copy(S, pool[slot, bh, v0:v0 + BV, 0:K])
        else:
            T.copy(S, pool[slot, bh, 0:K, v0:v0 + BV])

    @T.prim_func
    def qla_fused_fwd(
        q: T.StridedTensor((NT, H, K), (sq, K, 1), in_dtype),
        k: T.StridedTensor((NT, H, K), (sk, K, 1), in_dtype),
        v: T.StridedTensor((NT, HV, V), (sv, V, 1), in_dtype),
        gcum: T.Tensor((NT, HV), accum),
        a: T.Tensor((NT, HV, C), in_dtype),
        cu_seqlens: T.Tensor((NS + 1,), "int32"),
        state_indices: T.Tensor((NS,), "int32"),
        has_initial_state: T.Tensor((NS,), "uint8"),
        pool: T.StridedTensor(pool_shape, (sp, V * K, V if not vk else K, 1), pool_dtype),
        out: T.StridedTensor((NT, HV, V), (so, V, 1), in_dtype),
        null_slot: T.int32,
    ):
        with T.Kernel(NV, HV, NS, threads=threads) as (bv, bh, bn):
            q_s = T.alloc_shared((C, K), in_dtype)
            k_s = T.alloc_shared((C, K), in_dtype)
            v_s = T.alloc_shared((C, BV), in_dtype)
            a_s = T.alloc_shared((C, C), in_dtype)
            g_s = T.alloc_shared((C,), accum)
            s_s = T.alloc_shared(s_shape, in_dtype)
            w_s = T.alloc_shared((C, BV), in_dtype)
            u_s = T.alloc_shared((C, BV), in_dtype)
            p_s = T.alloc_shared((C, C), in_dtype)

            S = T.alloc_fragment(s_shape, accum)
            ks = T.alloc_fragment((C, BV), accum)
            u = T.alloc_fragment((C, BV), accum)
            o = T.alloc_fragment((C, BV), accum)
            p = T.alloc_fragment((C, C), accum)

            v0 = bv * BV
            bos = T.alloc_var("int32")
            eos = T.alloc_var("int32")
            slot = T.alloc_var("int32")
            bos = cu_seqlens[bn]
            eos = cu_seqlens[bn + 1]
            slot = state_indices[bn]
            skip = (slot < 0) | (slot == null_slot)
            nchunks = T.alloc_var("int32")
            nchunks = T.ceildiv(eos - bos, C)

            if pipelined:
                # No if/else around the pipelined loop: TileLang's warp specialisation mis-lowered
                # that shape (skipped sequences' outputs left unwritten on the H200). A skipped
                # sequence runs the loop zero times, then zero-fills its rows.
                nloop = T.alloc_var("int32")
                nloop = T.if_then_else(skip, 0, nchunks)
                T.clear(S)
                live = (slot >= 0) & (slot != null_slot)
                if read_has_initial_state:
                    if live & (has_initial_state[bn] != 0):
                        load_state(pool, slot, bh, v0, S)
                else:
                    if live:
                        load_state(pool, slot, bh, v0, S)
                for c in T.Pipelined(nloop, num_stages=2):
                    chunk_step(c, bos, eos, bh, v0, q, k, v, a, gcum, out, q_s, k_s, v_s, a_s, g_s, s_s, w_s, u_s,
                               p_s, S, ks, u, o, p)
                if skip:
                    zero_rows(nchunks, bos, eos, bh, v0, out)
                else:
                    store_state(pool, slot, bh, v0, S)
            else:
                if skip:
                    for c in T.serial(nchunks):
                        for i, j in T.Parallel(C, BV):
                            if bos + c * C + i < eos:
                                out[bos + c * C + i, bh, v0 + j] = T.cast(0, in_dtype)
                else:
                    if read_has_initial_state:
                        if has_initial_state[bn] != 0:
                            load_state(pool, slot, bh, v0, S)
                        else:
                            T.clear(S)
                    else:
                        load_state(pool, slot, bh, v0, S)

                    for c in T.serial(nchunks):
                        left = bos + c * C
                        nvalid = T.min(eos - bos - c * C, C)
                        T.copy(q[left:left + C, bh // G, 0:K], q_s)
                        T.copy(k[left:left + C, bh // G, 0:K], k_s)
                        T.copy(v[left:left + C, bh, v0:v0 + BV], v_s)
                        T.copy(a[left:left + C, bh, 0:C], a_s)
                        T.copy(gcum[left:left + C, bh], g_s)
                        # Rows ≥ nvalid hold the next sequence's (finite) data or zeros: every use
                        # below masks them, and only e^{γ_C − γ_i} with i < nvalid is formed.
                        glast = g_s[nvalid - 1]
                        if use_qk_l2norm:
                            xf = T.alloc_fragment((C, K), accum)
                            xsq = T.alloc_fragment((C, K), accum)
                            rn = T.alloc_fragment((C,), accum)
                            l2norm_rows(q_s, xf, xsq, rn)
                            l2norm_rows(k_s, xf, xsq, rn)
                        T.copy(S, s_s)

                        # W = V − e^γ ⊙ (K S)
                        if vk:
                            T.gemm(k_s, s_s, ks, transpose_B=True, clear_accum=True)
                        else:
                            T.gemm(k_s, s_s, ks, clear_accum=True)
                        for i, j in T.Parallel(C, BV):
                            ks[i, j] = v_s[i, j] - T.exp(g_s[i]) * ks[i, j]
                        T.copy(ks, w_s)
                        # U = Aβ W
                        T.gemm(a_s, w_s, u, clear_accum=True)
                        T.copy(u, u_s)
                        # P = scale · (Q Kᵀ ⊙ D_incl)
                        T.gemm(q_s, k_s, p, transpose_B=True, clear_accum=True)
                        for i, j in T.Parallel(C, C):
                            p[i, j] = T.if_then_else((j <= i) & (i < nvalid), p[i, j] * (scale * T.exp(g_s[i] - g_s[j])), 0.0)
                        T.copy(p, p_s)
                        # O = scale · e^γ ⊙ (Q S) + P U
                        if vk:
                            T.gemm(q_s, s_s, o, transpose_B=True, clear_accum=True)
                        else:
                            T.gemm(q_s, s_s, o, clear_accum=True)
                        for i, j in T.Parallel(C, BV):
                            o[i, j] = T.if_then_else(i < nvalid, o[i, j] * (scale * T.exp(g_s[i])), 0.0)
                        T.gemm(p_s, u_s, o, clear_accum=False)
                        for i, j in T.Parallel(C, BV):
                            if i < nvalid:
                                out[left + i, bh, v0 + j] = o[i, j]
                        # S ← e^{γ_C} S + Kᵀ (e^{γ_C − γ} ⊙ U)
                        for i, j in T.Parallel(C, BV):
                            u[i, j] = T.if_then_else(i < nvalid, u[i, j] * T.exp(glast - g_s[i]), 0.0)
                        T.copy(u, w_s)
                        if vk:
                            for i, j in T.Parallel(BV, K):
                                S[i, j] = S[i, j] * T.exp(glast)
                            T.gemm(w_s, k_s, S, transpose_A=True, clear_accum=False)
                        else:
                            for i, j in T.Parallel(K, BV):
                                S[i, j] = S[i, j] * T.exp(glast)
                            T.gemm(k_s, w_s, S, transpose_A=True, clear_accum=False)

                    if vk:
                        T.copy(S, pool[slot, bh, v0:v0 + BV, 0:K])
                    else:
                        T.copy(S, pool[slot, bh, 0:K, v0:v0 + BV])

    return qla_fused_fwd
