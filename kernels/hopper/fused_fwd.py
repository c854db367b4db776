"""Stage 2 of the Hopper GDN prefill: the state walk and the output, fused and warp-specialised,
reading and writing the engine's state pool by index.

One CTA per (V block, value head, sequence) walks the sequence's 64-token chunks in order. Per chunk,
with Q, K [64, K], V [64, BV], Aβ and γ from :mod:`kkt_solve` (bf16 tensor-core operands, fp32
accumulators):
    U₀ = Aβ V,   Wₖ = Aβ diag(e^γ) K          (depend on the chunk only: off the serial chain)
    U  = U₀ − Wₖ S                             (S rounded to bf16 for the product)
    O  = scale · [diag(e^γ) Q S + (Q Kᵀ ⊙ D_incl) U]
    S ← e^{γ_C} S + Kᵀ diag(e^{γ_C − γ}) U
Only differences γ_i − γ_j ≤ 0 are exponentiated. Wₖ, U, S never touch HBM.

Why warp-specialised: the loads, the output's GEMMs and the chunk-only products run beside the
serial chain (Wₖ S, then Kᵀ U). Measured on the H200 (≈ 3.1 µs a chunk at BV = 64): WG_U's
chunk-only work for the next chunk takes longer than WG_S's update, so it sits on the chain
(bench_serving/results/NOTES-hopper.md). 512 threads in four warpgroups, synchronised by mbarriers:
    WG_S  (threads   0–127)  owns S in fp32 registers: publishes S (bf16) to shared, rescales it,
                             accumulates Kᵀ(e^{γ_C−γ} ⊙ U) into it; loads/stores the pool row.
    WG_U  (threads 128–255)  U₀ and Wₖ for the chunk while WG_S finishes the previous one, then
                             U = U₀ − Wₖ S as soon as S is published.
    WG_O  (threads 256–383)  P = scale·(QKᵀ ⊙ D) before S is ready, then O from Q S and P U.
    WG_IO (threads 384–511)  three loader warps (TMA, double-buffered; a sequence's last chunk is
                             loaded whole too: see "Rows past a sequence's end") and one warp storing O.
Rows past a sequence's end (its last, partial chunk): q/k/v/Aβ rows there hold the next sequence's
(finite) data or TMA's zero fill; γ repeats the last valid value, so every exponent stays ≤ 0; Aβ's
columns past the end are zero (kkt_solve pads β with 0), so no valid row mixes them in; U's rows past
the end are zeroed by a select before they reach P U or the state; O's are not stored.
Barrier protocol (every barrier is used once per chunk, so its wait parity is the chunk's parity):
    ready[b] / free[b]   loaders → consumers / consumers → loaders, input buffer b = c mod 2
    s_ready / s_free     WG_S → (WG_U, WG_O) / back: the bf16 S in shared
    u_ready / u_free     WG_U → (WG_S, WG_O) / back: U and e^{γ_C−γ}⊙U in shared
    o_ready / o_free     WG_O → store warp / back: the bf16 O tile in shared
    qk_ready             WG_O → WG_U (in-kernel l2norm only): q, k normalised in place
Waiting on parity (c+1) mod 2 of a "free" barrier passes at once for c = 0 (a fresh mbarrier counts
its phase before the first as complete) and otherwise waits for the previous chunk's release.

Phases (compile-time): 0 = the prefill proper; 1 and 3 serve exact intra-card context parallelism
(:mod:`cp`): phase 1 walks partitions without output into a scratch buffer — row r < NSP from S = 0
with the real V (gives h_r), row NSP + r from S = I with V ≡ 0 (gives the K×K transition M_r);
phase 3 walks virtual sequences from given fp32 start states and stores the final state to the pool
only on each sequence's last partition.

Pool handling (phases 0, 3): ``slot < 0`` or ``slot == null_slot`` → zero output, no pool access.
Phase 0 starts from ``pool[slot]`` (or zero when ``has_initial_state[n]`` is 0: no memset) and
writes the final S back to ``pool[slot]`` in the pool's dtype, any ``stride(0)``, layout "vk"
(pool [slots, HV, V, K]) or "kv" (pool [slots, HV, K, V]); S is kept in the pool's orientation.

Grid: (V / BV, HV, sequences); BV ∈ {32, 64, 128} (at 32 the "vk" state update, M = 32, runs on
mma.sync instead of wgmma). T, N and the pool's row count and stride are dynamic; token strides
of q/k/v/out are compile-time (TMA descriptors and 16-byte stores; a stride that is not a multiple
of 16 bytes falls back to plain loads).
"""

import tilelang
import tilelang.language as T

CHUNK = 64
# Every cross-warpgroup hazard is ordered by the mbarriers below and every hazard inside a
# warpgroup by an explicit named barrier (BAR_U, BAR_O), so TileLang's automatic shared-memory
# sync pass is off: it cannot prove the warpgroup branches warp-uniform and refuses the kernel.
PASS_CONFIGS = {tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: False,
                tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True}
BAR_U, BAR_O = 2, 3      # named barrier ids (0 is __syncthreads) for WG_U's and WG_O's 128 threads
THREADS = 512
# Register split across the warpgroups (setmaxnreg; 512 threads share 64K registers):
# WG_S holds S ([BV, K] fp32: 128 registers a thread at BV = 128), WG_U holds U₀ and Wₖ.
NREG_S, NREG_U, NREG_O, NREG_IO = 168, 160, 128, 32


def build_fused_fwd(H: int, HV: int, K: int, V: int, block_v: int, in_dtype: str, pool_dtype: str,
                    state_layout: str, use_qk_l2norm: bool, read_has_initial_state: bool,
                    scale: float, strides: tuple[int, int, int, int], phase: int = 0):
    """TileLang prim_func for one variant. ``state_layout``: "vk" (pool [slots, HV, V, K]) or "kv".

    ``strides``: token strides of q, k, v, out (elements). They are compile-time so that loads and
    stores vectorise (an engine's q/k/v views of its packed qkv buffer have one fixed stride per
    model). ``phase``: 0 prefill, 1 CP partials, 3 CP output from start states (see module doc)."""
    if phase not in (0, 1, 3):
        raise ValueError(f"phase must be 0, 1 or 3, got {phase}")
    if K != 128 or V % block_v or block_v not in (32, 64, 128):
        raise ValueError(f"unsupported K={K}, V={V}, block_v={block_v}")
    C = CHUNK
    G = HV // H
    BV = block_v
    NV = V // BV
    vk = state_layout == "vk"
    with_output = phase != 1
    NT = T.dynamic("num_tokens")
    NS = T.dynamic("num_seqs")
    NP = T.dynamic("num_slots")
    sq, sk, sv, so = (int(x) for x in strides)
    elem = 2  # bytes of the 16-bit input dtype
    tma_qk = (sq * elem) % 16 == 0 and (sk * elem) % 16 == 0
    tma_v = (sv * elem) % 16 == 0
    sp = T.dynamic("stride_pool")
    accum = "float32"
    pool_shape = (NP, HV, V, K) if vk else (NP, HV, K, V)
    pool_strides = (sp, V * K, K if vk else V, 1)
    state_shape = (V, K) if vk else (K, V)
    s_shape = (BV, K) if vk else (K, BV)
    # Arrive counts: consumers of the input buffers, of S in shared and of U in shared.
    n_data = 384 if (with_output or use_qk_l2norm) else 256
    n_s = 256 if with_output else 128
    n_u = 256 if with_output else 128

    @T.macro
    def state_rows(buf, row, bh, v0, S, to_state: bool):
        if to_state and buf.dtype == "float32":
            # An fp32 row loaded straight into S's registers makes ptxas spill at V-block 128
            # (1 KB a thread; "wgmma serialized due to insufficient register resources"); routed
            # through an explicit ×1 (exact) it does not. Rows past the buffer read as zero.
            if row < buf.shape[0]:
                if vk:
                    for i, j in T.Parallel(BV, K):
                        S[i, j] = T.call_extern("float32", "__fmul_rn", buf[row, bh, v0 + i, j], T.float32(1.0))
                else:
                    for i, j in T.Parallel(K, BV):
                        S[i, j] = T.call_extern("float32", "__fmul_rn", buf[row, bh, i, v0 + j], T.float32(1.0))
            else:
                T.clear(S)
        elif vk:
            if to_state:
                T.copy(buf[row, bh, v0:v0 + BV, 0:K], S)
            else:
                T.copy(S, buf[row, bh, v0:v0 + BV, 0:K])
        else:
            if to_state:
                T.copy(buf[row, bh, 0:K, v0:v0 + BV], S)
            else:
                T.copy(S, buf[row, bh, 0:K, v0:v0 + BV])

    @T.macro
    def l2norm_rows(x_s, xf, rn):
        # x_s [C, K] in shared, normalised in place (fp32 math); rows are tokens.
        T.copy(x_s, xf)
        for i, j in T.Parallel(C, K):
            xf[i, j] = xf[i, j] * xf[i, j]
        T.reduce_sum(xf, rn, dim=1)
        T.copy(x_s, xf)
        for i, j in T.Parallel(C, K):
            xf[i, j] = xf[i, j] * T.rsqrt(rn[i] + 1e-6)
        T.copy(xf, x_s)

    @T.macro
    def walk(bv, bh, q, k, v, gcum, a, out, src, src_row, dst, dst_row, bos, eos, nloop, init_mode, do_store,
             transition):
        """The four-warpgroup chunk walk of one (V block, head, sequence) — see the module doc.
        init_mode: 0 zero start, 1 start from src[src_row], 2 identity (CP transition rows).
        do_store: write the final S to dst[dst_row]. transition: V ≡ 0 (CP phase 1)."""
        v0 = bv * BV
        hk = bh // G

        q_s = T.alloc_shared((2, C, K), in_dtype)
        k_s = T.alloc_shared((2, C, K), in_dtype)
        v_s = T.alloc_shared((2, C, BV), in_dtype)
        a_s = T.alloc_shared((2, C, C), in_dtype)
        g_s = T.alloc_shared((2, C), accum)
        eg_s = T.alloc_shared((2, C), accum)          # e^{γ_j}: WG_U's Aβ diag(e^γ)
        egl_s = T.alloc_shared((2, C), accum)         # e^{γ_C − γ_i}: WG_U's state-update scaling
        s_s = T.alloc_shared(s_shape, in_dtype)       # S for the products (bf16)
        w_s = T.alloc_shared((C, K), in_dtype)        # −Wₖ
        u_s = T.alloc_shared((C, BV), in_dtype)       # U (for P U)
        un_s = T.alloc_shared((C, BV), in_dtype)      # e^{γ_C − γ} ⊙ U (for the state update)
        p_s = T.alloc_shared((C, C), in_dtype)
        o_s = T.alloc_shared((C, BV), in_dtype)

        ready = T.alloc_barrier(arrive_count=[96, 96])
        free = T.alloc_barrier(arrive_count=[n_data, n_data])
        s_ready = T.alloc_barrier(arrive_count=128)
        s_free = T.alloc_barrier(arrive_count=n_s)
        u_ready = T.alloc_barrier(arrive_count=128)
        u_free = T.alloc_barrier(arrive_count=n_u)
        o_ready = T.alloc_barrier(arrive_count=128)
        o_free = T.alloc_barrier(arrive_count=32)
        qk_ready = T.alloc_barrier(arrive_count=128)      # l2norm variants: q, k normalised in place

        S = T.alloc_fragment(s_shape, accum)              # WG_S
        decay = T.alloc_local((1,), accum)
        u = T.alloc_fragment((C, BV), accum)              # WG_U
        wk = T.alloc_fragment((C, K), accum)
        af = T.alloc_fragment((C, C), accum)
        o = T.alloc_fragment((C, BV), accum)              # WG_O
        p = T.alloc_fragment((C, C), accum)
        xf = T.alloc_fragment((C, K), accum)
        rn = T.alloc_fragment((C,), accum)

        tx = T.get_thread_binding()
        if tx < 128:
            # ---------------- WG_S: the state ----------------
            T.set_max_nreg(NREG_S, 1)
            if init_mode == 1:
                state_rows(src, src_row, bh, v0, S, True)
            elif init_mode == 2:
                if vk:
                    for i, j in T.Parallel(BV, K):
                        S[i, j] = T.if_then_else(v0 + i == j, 1.0, 0.0)
                else:
                    for i, j in T.Parallel(K, BV):
                        S[i, j] = T.if_then_else(i == v0 + j, 1.0, 0.0)
            else:
                T.clear(S)
            for c in T.serial(nloop):
                b = c % 2
                T.barrier_wait(ready[b], (c // 2) % 2)
                T.barrier_wait(s_free, (c + 1) % 2)
                T.copy(S, s_s)
                T.fence_proxy_async()
                T.barrier_arrive(s_ready)
                # γ of the chunk's last valid token (the loaders pad a short chunk with it)
                decay[0] = T.exp(g_s[b, C - 1])
                for i, j in T.Parallel(s_shape[0], s_shape[1]):
                    S[i, j] = S[i, j] * decay[0]
                T.barrier_wait(u_ready, c % 2)
                if vk:
                    T.gemm(un_s, k_s[b, :, :], S, transpose_A=True, clear_accum=False)
                else:
                    T.gemm(k_s[b, :, :], un_s, S, transpose_A=True, clear_accum=False)
                T.barrier_arrive(u_free)
                T.barrier_arrive(free[b])
            if do_store:
                state_rows(dst, dst_row, bh, v0, S, False)

        elif tx < 256:
            # ---------------- WG_U: U = U₀ − Wₖ S ----------------
            T.set_max_nreg(NREG_U, 1)
            for c in T.serial(nloop):
                b = c % 2
                T.barrier_wait(ready[b], (c // 2) % 2)
                # U₀ = Aβ V
                if transition:
                    T.clear(u)
                else:
                    T.gemm(a_s[b, :, :], v_s[b, :, :], u, clear_accum=True)
                # Aβ diag(e^γ) in place (only this warpgroup reads Aβ), then −Wₖ = −(Aβ e^γ) K
                T.copy(a_s[b, :, :], af)
                for i, j in T.Parallel(C, C):
                    af[i, j] = af[i, j] * eg_s[b, j]
                T.copy(af, a_s[b, :, :])
                T.fence_proxy_async()
                T.sync_threads(BAR_U, 128)
                if use_qk_l2norm:
                    T.barrier_wait(qk_ready, c % 2)       # WG_O has normalised k in place
                T.gemm(a_s[b, :, :], k_s[b, :, :], wk, clear_accum=True)
                for i, j in T.Parallel(C, K):
                    wk[i, j] = -wk[i, j]
                T.copy(wk, w_s)
                T.fence_proxy_async()
                T.sync_threads(BAR_U, 128)
                T.barrier_wait(s_ready, c % 2)
                # U = U₀ + (−Wₖ) S
                if vk:
                    T.gemm(w_s, s_s, u, transpose_B=True, clear_accum=False)
                else:
                    T.gemm(w_s, s_s, u, clear_accum=False)
                T.barrier_arrive(s_free)
                T.barrier_wait(u_free, (c + 1) % 2)
                nvalid = T.min(eos - bos - c * C, C)
                # Rows past eos came from the next sequence's Aβ: zero them (a select, not a
                # product) so they reach neither P U nor the state.
                for i, j in T.Parallel(C, BV):
                    u[i, j] = T.if_then_else(i < nvalid, u[i, j], 0.0)
                if with_output:
                    T.copy(u, u_s)
                for i, j in T.Parallel(C, BV):
                    u[i, j] = u[i, j] * egl_s[b, i]
                T.copy(u, un_s)
                T.fence_proxy_async()
                T.barrier_arrive(u_ready)
                T.barrier_arrive(free[b])

        elif tx < 384:
            # ---------------- WG_O: l2norm of q, k (if asked) and the output ----------------
            T.set_max_nreg(NREG_O, 1)
            if with_output or use_qk_l2norm:
                for c in T.serial(nloop):
                    b = c % 2
                    T.barrier_wait(ready[b], (c // 2) % 2)
                    if use_qk_l2norm:
                        l2norm_rows(q_s[b, :, :], xf, rn)
                        l2norm_rows(k_s[b, :, :], xf, rn)
                        T.fence_proxy_async()
                        T.sync_threads(BAR_O, 128)
                        T.barrier_arrive(qk_ready)
                    if with_output:
                        # P = scale · (Q Kᵀ ⊙ D_incl)
                        T.gemm(q_s[b, :, :], k_s[b, :, :], p, transpose_B=True, clear_accum=True)
                        for i, j in T.Parallel(C, C):
                            p[i, j] = T.if_then_else(j <= i, p[i, j] * (scale * T.exp(g_s[b, i] - g_s[b, j])), 0.0)
                        T.copy(p, p_s)
                        T.fence_proxy_async()
                        T.sync_threads(BAR_O, 128)
                        T.barrier_wait(s_ready, c % 2)
                        # O = scale · e^γ ⊙ (Q S) + P U
                        if vk:
                            T.gemm(q_s[b, :, :], s_s, o, transpose_B=True, clear_accum=True)
                        else:
                            T.gemm(q_s[b, :, :], s_s, o, clear_accum=True)
                        T.barrier_arrive(s_free)
                        for i, j in T.Parallel(C, BV):
                            o[i, j] = o[i, j] * (scale * T.exp(g_s[b, i]))
                        T.barrier_wait(u_ready, c % 2)
                        T.gemm(p_s, u_s, o, clear_accum=False)
                        T.barrier_arrive(u_free)
                    T.barrier_arrive(free[b])
                    if with_output:
                        T.barrier_wait(o_free, (c + 1) % 2)
                        T.copy(o, o_s)
                        T.fence_proxy_async()       # the store warp may read o_s with TMA
                        T.barrier_arrive(o_ready)

        else:
            # ---------------- WG_IO: loads and the output store ----------------
            T.set_max_nreg(NREG_IO, 0)
            # Branch on tx ranges (not a computed warp id): TileLang partitions each branch's
            # parallel loops over exactly the threads of that range.
            if tx < 416:
                for c in T.serial(nloop):
                    b = c % 2
                    left = bos + c * C
                    T.barrier_wait(free[b], (c // 2 + 1) % 2)
                    # Whole chunks, also a sequence's last one: rows past eos hold the next
                    # sequence's (finite) data or TMA's zero fill; WG_U zeroes those rows of U.
                    if tma_qk:
                        T.tma_copy(q[left:left + C, hk, 0:K], q_s[b, :, :], barrier=ready[b])
                        T.tma_copy(k[left:left + C, hk, 0:K], k_s[b, :, :], barrier=ready[b])
                    else:
                        for i, j in T.Parallel(C, K):
                            q_s[b, i, j] = q[T.min(left + i, NT - 1), hk, j]
                        for i, j in T.Parallel(C, K):
                            k_s[b, i, j] = k[T.min(left + i, NT - 1), hk, j]
                        T.fence_proxy_async()
                    T.barrier_arrive(ready[b])
            elif tx < 448:
                for c in T.serial(nloop):
                    b = c % 2
                    left = bos + c * C
                    T.barrier_wait(free[b], (c // 2 + 1) % 2)
                    if tma_v:
                        T.tma_copy(v[left:left + C, bh, v0:v0 + BV], v_s[b, :, :], barrier=ready[b])
                    else:
                        for i, j in T.Parallel(C, BV):
                            v_s[b, i, j] = v[T.min(left + i, NT - 1), bh, v0 + j]
                        T.fence_proxy_async()
                    # γ: rows past eos repeat the last valid γ, so every exponent stays ≤ 0. The
                    # two exponential vectors WG_U scales by are made here, off the chunk chain
                    # (the same expf of the same argument as per element: bit-identical).
                    for i in T.Parallel(C):
                        g_s[b, i] = gcum[T.min(left + i, eos - 1), bh]
                        eg_s[b, i] = T.exp(gcum[T.min(left + i, eos - 1), bh])
                        egl_s[b, i] = T.exp(gcum[T.min(left + C - 1, eos - 1), bh] - gcum[T.min(left + i, eos - 1), bh])
                    T.barrier_arrive(ready[b])
            elif tx < 480:
                for c in T.serial(nloop):
                    b = c % 2
                    left = bos + c * C
                    T.barrier_wait(free[b], (c // 2 + 1) % 2)
                    T.tma_copy(a[left:left + C, bh, 0:C], a_s[b, :, :], barrier=ready[b])
                    T.barrier_arrive(ready[b])
            else:
                if with_output:
                    for c in T.serial(nloop):
                        left = bos + c * C
                        T.barrier_wait(o_ready, c % 2)
                        if left + C <= eos:
                            T.copy(o_s, out[left:left + C, bh, v0:v0 + BV])
                        else:
                            for i, j in T.Parallel(C, BV):
                                if left + i < eos:
                                    out[left + i, bh, v0 + j] = o_s[i, j]
                        T.barrier_arrive(o_free)
                    if nloop == 0:
                        # a skipped (null-slot) sequence: zero output, no pool access
                        for t in T.serial(T.ceildiv(eos - bos, C)):
                            for i, j in T.Parallel(C, BV):
                                if bos + t * C + i < eos:
                                    out[bos + t * C + i, bh, v0 + j] = T.cast(0, in_dtype)

    def live(slot, null_slot):
        return (slot >= 0) & (slot != null_slot)

    if phase == 0:
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
            pool: T.StridedTensor(pool_shape, pool_strides, pool_dtype),
            out: T.StridedTensor((NT, HV, V), (so, V, 1), in_dtype),
            null_slot: T.int32,
        ):
            with T.Kernel(NV, HV, NS, threads=THREADS) as (bv, bh, bn):
                bos = cu_seqlens[bn]
                eos = cu_seqlens[bn + 1]
                slot = state_indices[bn]
                ok = live(slot, null_slot)
                nloop = T.if_then_else(ok, T.ceildiv(eos - bos, C), 0)
                if read_has_initial_state:
                    init_mode = T.if_then_else(ok & (has_initial_state[bn] != 0), 1, 0)
                else:
                    init_mode = T.if_then_else(ok, 1, 0)
                walk(bv, bh, q, k, v, gcum, a, out, pool, slot, pool, slot, bos, eos, nloop, init_mode, ok, False)
        return qla_fused_fwd

    if phase == 1:
        NSP = T.dynamic("num_partials")

        @T.prim_func
        def qla_fused_fwd_partials(
            q: T.StridedTensor((NT, H, K), (sq, K, 1), in_dtype),
            k: T.StridedTensor((NT, H, K), (sk, K, 1), in_dtype),
            v: T.StridedTensor((NT, HV, V), (sv, V, 1), in_dtype),
            gcum: T.Tensor((NT, HV), accum),
            a: T.Tensor((NT, HV, C), in_dtype),
            part_bounds: T.Tensor((NSP, 2), "int32"),
            scratch: T.Tensor((2 * NSP, HV) + state_shape, accum),
        ):
            with T.Kernel(NV, HV, 2 * NSP, threads=THREADS) as (bv, bh, bz):
                r = bz % NSP
                bos = part_bounds[r, 0]
                eos = part_bounds[r, 1]
                transition = bz >= NSP
                walk(bv, bh, q, k, v, gcum, a, None, scratch, bz, scratch, bz, bos, eos, T.ceildiv(eos - bos, C),
                     T.if_then_else(transition, 2, 0), True, transition)
        return qla_fused_fwd_partials

    NSV = T.dynamic("num_virtual_seqs")

    @T.prim_func
    def qla_fused_fwd_from_starts(
        q: T.StridedTensor((NT, H, K), (sq, K, 1), in_dtype),
        k: T.StridedTensor((NT, H, K), (sk, K, 1), in_dtype),
        v: T.StridedTensor((NT, HV, V), (sv, V, 1), in_dtype),
        gcum: T.Tensor((NT, HV), accum),
        a: T.Tensor((NT, HV, C), in_dtype),
        cu_seqlens_v: T.Tensor((NSV + 1,), "int32"),
        slot_v: T.Tensor((NSV,), "int32"),
        last_v: T.Tensor((NSV,), "uint8"),
        starts: T.Tensor((NSV, HV) + state_shape, accum),
        pool: T.StridedTensor(pool_shape, pool_strides, pool_dtype),
        out: T.StridedTensor((NT, HV, V), (so, V, 1), in_dtype),
        null_slot: T.int32,
    ):
        with T.Kernel(NV, HV, NSV, threads=THREADS) as (bv, bh, bn):
            bos = cu_seqlens_v[bn]
            eos = cu_seqlens_v[bn + 1]
            slot = slot_v[bn]
            ok = live(slot, null_slot)
            walk(bv, bh, q, k, v, gcum, a, out, starts, bn, pool, slot, bos, eos,
                 T.if_then_else(ok, T.ceildiv(eos - bos, C), 0), T.if_then_else(ok, 1, 0),
                 ok & (last_v[bn] != 0), False)
    return qla_fused_fwd_from_starts
