"""CP phase 2: chain the partitions' affine maps into each partition's exact initial state.

For real sequence j with P_j partitions (virtual sequences vs_j … vs_j + P_j − 1) and partial rows
r_j … r_j + P_j − 2 of ``scratch`` (h_p at row r_j + p, M_p at row num_partial + r_j + p):

    S = pool[slot_j]  (fp32 or bf16 pool, any stride(0); 0 when has_initial_state[j] == 0;
                       0 and no pool read when slot_j < 0 or slot_j == null_slot)
    for p in 0 … P_j − 1:
        starts[vs_j + p] = S
        if p < P_j − 1:  S = M_p S + h_p

The tail-start form (``read_tail``) writes starts[vs_j + p] only where phase 3 reads it: where
partition p − 1 was a tail start (w > 0, M_{p−1} = 0) the start is h_{p−1} itself, which phase 3
reads from ``scratch`` (see ``fused_fwd``'s phase 3).

Storage follows the pool's layout: "vk" holds Sᵀ [V, K] and M_pᵀ, so the step is
Sᵀ ← Sᵀ M_pᵀ + h_pᵀ ([BV, K] @ [K, K]); "kv" holds S [K, V] and M_p: S ← M_p S + h_p
([K, K] @ [K, BV]). The product runs on bf16 tensor cores with both operands split into hi + lo
bf16 parts (x = hi + lo, |lo| ≤ 2⁻⁹|x|): S M ≈ Sₕ Mₕ + Sₕ Mₗ + Sₗ Mₕ with fp32 accumulation,
≈ 2⁻¹⁶ relative per step. tf32 would give ≈ 2⁻¹¹: on a 16-partition chain with M_p ≈ I the torch
emulation in tests/test_cp.py measures state errors of 2.8e-6 (split) vs 8.6e-4 (tf32, truncated),
and tf32 wgmma would also need a K-major B, which the "vk" Mᵀ storage is not.

Grid: (V / BV, HV, N real sequences); BV = 64 by default (:data:`cp.COMBINE_BLOCK_V`, independent of the
fused kernel's V-block): twice the CTAs of BV = 128 on this serial chain, half the product per step. N, the virtual/partial counts, the pool's rows and stride
are dynamic.
"""

import tilelang
import tilelang.language as T

PASS_CONFIGS = {tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: False}


def build_cp_combine(HV: int, K: int, V: int, block_v: int, pool_dtype: str, state_layout: str,
                     read_has_initial_state: bool, read_tail: bool = False):
    """TileLang prim_func: ``(pool, state_indices, has_initial_state, vs_offsets, row_offsets, scratch,
    starts, num_partial, null_slot)``; see the module docstring. ``read_tail``: a last argument
    ``tail [NSP, HV]`` int32 (CP tail starts, :mod:`cp_tail`): where w > 0 phase 1 stored M_p = 0 and
    the step is S ← h_p, without the three products (the chain's cost at many partitions)."""
    assert K == V, "scratch holds h (K×V) and M (K×K) rows in one tensor"
    BV = block_v
    NV = V // BV
    threads = 256 if BV >= 128 else 128
    vk = state_layout == "vk"
    N = T.dynamic("num_seqs")
    NSV = T.dynamic("num_virtual")
    NS2 = T.dynamic("num_scratch")
    NP = T.dynamic("num_slots")
    sp = T.dynamic("stride_pool")
    accum = "float32"
    half = "bfloat16"
    inner = (V, K) if vk else (K, V)
    pool_shape = (NP, HV, *inner)
    s_shape = (BV, K) if vk else (K, BV)

    @T.macro
    def state_slice_copy_in(src, row, bh, v0, S):
        if vk:
            T.copy(src[row, bh, v0:v0 + BV, 0:K], S)
        else:
            T.copy(src[row, bh, 0:K, v0:v0 + BV], S)

    @T.macro
    def state_slice_copy_out(S, dst, row, bh, v0):
        if vk:
            T.copy(S, dst[row, bh, v0:v0 + BV, 0:K])
        else:
            T.copy(S, dst[row, bh, 0:K, v0:v0 + BV])

    @T.macro
    def affine_step(S, sh_s, sl_s, mh_s, ml_s, scratch, num_partial, row, bh, v0):
        # S = hi + lo (bf16 each), then S ← h_p; S += Sₕ Mₕ + Sₕ Mₗ + Sₗ Mₕ
        if vk:
            for i, j in T.Parallel(BV, K):
                sh_s[i, j] = T.cast(S[i, j], half)
                sl_s[i, j] = T.cast(S[i, j] - T.cast(T.cast(S[i, j], half), accum), half)
        else:
            for i, j in T.Parallel(K, BV):
                sh_s[i, j] = T.cast(S[i, j], half)
                sl_s[i, j] = T.cast(S[i, j] - T.cast(T.cast(S[i, j], half), accum), half)
        # M straight from global into its two bf16 halves (no 128×128 fp32 fragment)
        for i, j in T.Parallel(K, K):
            mh_s[i, j] = T.cast(scratch[num_partial + row, bh, i, j], half)
            ml_s[i, j] = T.cast(scratch[num_partial + row, bh, i, j]
                                - T.cast(T.cast(scratch[num_partial + row, bh, i, j], half), accum), half)
        state_slice_copy_in(scratch, row, bh, v0, S)
        if vk:
            # Sᵀ [BV, K(c)] @ Mᵀ [K(c), K]
            T.gemm(sh_s, mh_s, S, clear_accum=False)
            T.gemm(sh_s, ml_s, S, clear_accum=False)
            T.gemm(sl_s, mh_s, S, clear_accum=False)
        else:
            # M [K, K(c)] @ S [K(c), BV]
            T.gemm(mh_s, sh_s, S, clear_accum=False)
            T.gemm(ml_s, sh_s, S, clear_accum=False)
            T.gemm(mh_s, sl_s, S, clear_accum=False)

    @T.macro
    def chain(pool, state_indices, has_initial_state, vs_offsets, row_offsets, scratch, starts, num_partial,
              null_slot, tail):
        with T.Kernel(NV, HV, N, threads=threads) as (bv, bh, bn):
            sh_s = T.alloc_shared(s_shape, half)
            sl_s = T.alloc_shared(s_shape, half)
            mh_s = T.alloc_shared((K, K), half)
            ml_s = T.alloc_shared((K, K), half)
            S = T.alloc_fragment(s_shape, accum)

            v0 = bv * BV
            slot = T.alloc_var("int32")
            slot = state_indices[bn]
            live = (slot >= 0) & (slot != null_slot)
            vs = vs_offsets[bn]
            nparts = vs_offsets[bn + 1] - vs
            r0 = row_offsets[bn]

            T.clear(S)
            if read_has_initial_state:
                if live & (has_initial_state[bn] != 0):
                    state_slice_copy_in(pool, slot, bh, v0, S)
            else:
                if live:
                    state_slice_copy_in(pool, slot, bh, v0, S)

            if tail is None:
                for p in T.serial(nparts):
                    state_slice_copy_out(S, starts, vs + p, bh, v0)
                    if p < nparts - 1:
                        affine_step(S, sh_s, sl_s, mh_s, ml_s, scratch, num_partial, r0 + p, bh, v0)
            else:
                # A tail start (w_p > 0) stored M_p = 0, so S_{p+1} = h_p exactly: phase 3 reads h_p
                # from scratch itself, and this chain neither copies it to starts nor loads it unless
                # an exact step (w_{p+1} = 0) follows and needs it as S_{p+1}. Where every partition
                # is a tail start the chain only writes starts[vs] (session 23's ncu: the chain of
                # copies took 10 µs at 16/32 1×32768, P = 4).
                prev_tail = T.alloc_var("int32")
                prev_tail = 0
                for p in T.serial(nparts):
                    if prev_tail == 0:
                        state_slice_copy_out(S, starts, vs + p, bh, v0)
                    if p < nparts - 1:
                        if tail[r0 + p, bh] > 0:
                            prev_tail = 1
                        else:
                            if prev_tail != 0:
                                state_slice_copy_in(scratch, r0 + p - 1, bh, v0, S)     # S_p = h_{p-1}
                            affine_step(S, sh_s, sl_s, mh_s, ml_s, scratch, num_partial, r0 + p, bh, v0)
                            prev_tail = 0

    if read_tail:
        NSP = T.dynamic("num_partials")

        @T.prim_func
        def qla_cp_combine_tail(
            pool: T.StridedTensor(pool_shape, (sp, V * K, inner[1], 1), pool_dtype),
            state_indices: T.Tensor((N,), "int32"),
            has_initial_state: T.Tensor((N,), "uint8"),
            vs_offsets: T.Tensor((N + 1,), "int32"),
            row_offsets: T.Tensor((N,), "int32"),
            scratch: T.Tensor((NS2, HV, *inner), accum),
            starts: T.Tensor((NSV, HV, *inner), accum),
            num_partial: T.int32,
            null_slot: T.int32,
            tail: T.Tensor((NSP, HV), "int32"),
        ):
            chain(pool, state_indices, has_initial_state, vs_offsets, row_offsets, scratch, starts, num_partial,
                  null_slot, tail)
        return qla_cp_combine_tail

    @T.prim_func
    def qla_cp_combine(
        pool: T.StridedTensor(pool_shape, (sp, V * K, inner[1], 1), pool_dtype),
        state_indices: T.Tensor((N,), "int32"),
        has_initial_state: T.Tensor((N,), "uint8"),
        vs_offsets: T.Tensor((N + 1,), "int32"),
        row_offsets: T.Tensor((N,), "int32"),
        scratch: T.Tensor((NS2, HV, *inner), accum),
        starts: T.Tensor((NSV, HV, *inner), accum),
        num_partial: T.int32,
        null_slot: T.int32,
    ):
        chain(pool, state_indices, has_initial_state, vs_offsets, row_offsets, scratch, starts, num_partial,
              null_slot, None)

    return qla_cp_combine
