"""GDN's causal conv for a prefill batch, the engine's conv state read and written in place by slot,
with q and k l2-normalised on the way out (``qla_serve.gdn_conv``).

For channel c of the packed projection ``x [T, 2·H·K + HV·V]`` (q heads, k heads, v heads) and a
sequence with the conv state rows s₀ … s_{W−2} in front of its tokens (zero when it has no initial
state):
    y[t, c] = silu(bias[c] + Σ_j w[c, j] · xx[t + j, c])      xx = [s₀ … s_{W−2}, x_start … x_end−1]
q and k heads are then scaled by 1/sqrt(Σ_c y² + 1e-6) over each head's 128 channels (the op's
l2norm), and the output is written in the same packed layout. The sequence's new conv state is the
last W − 1 rows of xx. This is what vLLM's causal conv (Triton) followed by the op's l2norm pass
computes, in one kernel: the conv output never makes a second round trip through memory for q/k
normalisation, and a layer's prefill launches one kernel fewer.

Grid: (chunks of 64 tokens from the plan's ``chunk_bounds``, 128-channel blocks = one head each),
128 threads. A CTA loads its chunk's rows and the W − 1 rows in front of them (from x, or for a
sequence's first chunk from the conv state), convolves in fp32, normalises (q/k blocks), stages the
tile in shared memory and stores it (one bulk store for a whole chunk). Only the CTAs of a sequence's
*first* chunk touch its conv state: they read the old rows and then write the new ones, which they
take from x's last rows (no other CTA reads the state, so there is no race across CTAs).
Sequences whose slot is negative or ``null_slot`` are convolved from a zero state and leave the
pool alone.

Compile-time: head counts, W, dtypes, the conv state's layout ("sd": ``[slots, W−1, C]``, vLLM's
default; "ds": ``[slots, C, W−1]``), bias or not, l2norm or not, whether a has_initial_state vector
is read, and x's token stride (an engine's projection has one fixed stride per model). T, the chunk
count and the pool's rows and slot stride are dynamic.
"""

import tilelang.language as T

CHUNK = 64
BLOCK_C = 128       # channels per CTA: one head (K = V = 128)
THREADS = 256       # 32 of the tile's values a thread (at 128, 64 and their squares held ~170 registers)
EPS = 1e-6
PASS_CONFIGS: dict = {}


def build_conv(H: int, HV: int, K: int, V: int, width: int, in_dtype: str, state_dtype: str, state_layout: str,
               has_bias: bool, l2norm_qk: bool, read_has_initial_state: bool, x_stride: int):
    if K != BLOCK_C or V != BLOCK_C:
        raise ValueError(f"the conv kernel takes K = V = {BLOCK_C}, got K={K}, V={V}")
    if state_layout not in ("sd", "ds"):
        raise ValueError(f"state_layout must be 'sd' or 'ds', got {state_layout!r}")
    C, BC, W = CHUNK, BLOCK_C, int(width)
    S = W - 1                       # conv state rows
    CD = 2 * H * K + HV * V
    NB = CD // BC
    NQK = 2 * H                     # the first 2H channel blocks are q and k heads
    NT = T.dynamic("num_tokens")
    NS = T.dynamic("num_seqs")
    NC = T.dynamic("num_chunks")
    NP = T.dynamic("num_slots")
    sp = T.dynamic("stride_slot")
    sx = int(x_stride)
    f32 = "float32"
    sd = state_layout == "sd"
    state_shape = (NP, S, CD) if sd else (NP, CD, S)
    state_strides = (sp, CD, 1) if sd else (sp, S, 1)

    # Expression helpers, expanded when the kernel is parsed (compile-time W, layout and flags).
    def state_at(conv_state, slot, row, ch):
        return conv_state[slot, row, ch] if sd else conv_state[slot, ch, row]

    def row_at(x16, st_s, r, c):
        """Row r of xx for this chunk: the S rows in front (fp32) below S, the chunk's tile above."""
        return T.if_then_else(r < S, st_s[T.min(r, S - 1), c], T.cast(x16[T.max(r - S, 0), c], f32))

    def conv_at(w_s, x16, st_s, bias, t, c, c0):
        y = w_s[c, 0] * row_at(x16, st_s, t, c)
        for j in range(1, W):
            y = y + w_s[c, j] * row_at(x16, st_s, t + j, c)
        return y + T.cast(bias[c0 + c], f32) if has_bias else y

    def reads_state(live, has_initial_state, seq):
        return live & (has_initial_state[seq] != 0) if read_has_initial_state else live

    @T.macro
    def body(x, weight, bias, conv_state, chunk_bounds, state_indices, has_initial_state, out, null_slot, bc, hb):
        x16 = T.alloc_shared((C, BC), in_dtype)
        st_s = T.alloc_shared((S, BC), f32)     # fp32: an fp32 conv state goes through unrounded
        o_s = T.alloc_shared((C, BC), in_dtype)
        w_s = T.alloc_shared((BC, W), f32)
        acc = T.alloc_fragment((C, BC), f32)
        sq = T.alloc_fragment((C, BC), f32)
        rn = T.alloc_fragment((C,), f32)
        left = chunk_bounds[bc, 0]
        end = chunk_bounds[bc, 1]
        start = chunk_bounds[bc, 2]
        seq = chunk_bounds[bc, 3]
        slot = state_indices[seq]
        live = (slot >= 0) & (slot != null_slot)
        init = reads_state(live, has_initial_state, seq)
        c0 = hb * BC
        # The chunk's rows as one tile copy (vectorised; rows past x read as zero, rows of the next
        # sequence only reach outputs that are not stored), and apart from it the S rows in front:
        # x's when the chunk is not its sequence's first, else the conv state (zero without one).
        # The conv reads the bf16 tile as it is (36 KB of shared memory a CTA). Session 15's first
        # form loaded every element behind two conditions (588 µs for 8192 tokens at 16/32 heads,
        # vLLM's conv 118); its second staged the tile in fp32 (68 KB, three CTAs an SM: 171 µs).
        T.copy(x[left:left + C, c0:c0 + BC], x16)
        for r, c in T.Parallel(S, BC):
            tok = left - S + r
            st_s[r, c] = T.if_then_else(
                tok >= start, T.cast(x[tok, c0 + c], f32),
                T.if_then_else(init, T.cast(state_at(conv_state, slot, S + tok - start, c0 + c), f32), 0.0))
        for c, j in T.Parallel(BC, W):
            w_s[c, j] = T.cast(weight[c0 + c, j], f32)
        for t, c in T.Parallel(C, BC):
            y = conv_at(w_s, x16, st_s, bias, t, c, c0)
            acc[t, c] = y / (1.0 + T.exp(-y))                       # silu
        if l2norm_qk:
            for t, c in T.Parallel(C, BC):
                sq[t, c] = acc[t, c] * acc[t, c]
            T.reduce_sum(sq, rn, dim=1)
            for t, c in T.Parallel(C, BC):
                acc[t, c] = T.if_then_else(hb < NQK, acc[t, c] * T.rsqrt(rn[t] + EPS), acc[t, c])
        T.copy(acc, o_s)
        if left + C <= end:
            T.copy(o_s, out[left:left + C, c0:c0 + BC])
        else:
            for t, c in T.Parallel(C, BC):
                if left + t < end:
                    out[left + t, c0 + c] = o_s[t, c]
        # The sequence's new conv state: xx's last S rows. Row n − S + s of the sequence (n tokens) is
        # xx row n + s: in this first chunk's rows while n + s < C + S, else x itself.
        if live & (left == start):
            n = end - start
            for s, c in T.Parallel(S, BC):
                val = T.if_then_else(n + s < C + S, row_at(x16, st_s, T.min(n + s, C + S - 1), c),
                                     T.cast(x[end - S + s, c0 + c], f32))
                if sd:      # compile-time
                    conv_state[slot, s, c0 + c] = T.cast(val, state_dtype)
                else:
                    conv_state[slot, c0 + c, s] = T.cast(val, state_dtype)

    if has_bias:
        @T.prim_func
        def qla_gdn_conv_bias(
            x: T.StridedTensor((NT, CD), (sx, 1), in_dtype),
            weight: T.Tensor((CD, W), in_dtype),
            bias: T.Tensor((CD,), in_dtype),
            conv_state: T.StridedTensor(state_shape, state_strides, state_dtype),
            chunk_bounds: T.Tensor((NC, 4), "int32"),
            state_indices: T.Tensor((NS,), "int32"),
            has_initial_state: T.Tensor((NS,), "uint8"),
            out: T.Tensor((NT, CD), in_dtype),
            null_slot: T.int32,
        ):
            with T.Kernel(NC, NB, threads=THREADS) as (bc, hb):
                body(x, weight, bias, conv_state, chunk_bounds, state_indices, has_initial_state, out, null_slot,
                     bc, hb)
        return qla_gdn_conv_bias

    @T.prim_func
    def qla_gdn_conv(
        x: T.StridedTensor((NT, CD), (sx, 1), in_dtype),
        weight: T.Tensor((CD, W), in_dtype),
        conv_state: T.StridedTensor(state_shape, state_strides, state_dtype),
        chunk_bounds: T.Tensor((NC, 4), "int32"),
        state_indices: T.Tensor((NS,), "int32"),
        has_initial_state: T.Tensor((NS,), "uint8"),
        out: T.Tensor((NT, CD), in_dtype),
        null_slot: T.int32,
    ):
        with T.Kernel(NC, NB, threads=THREADS) as (bc, hb):
            body(x, weight, None, conv_state, chunk_bounds, state_indices, has_initial_state, out, null_slot, bc, hb)
    return qla_gdn_conv
