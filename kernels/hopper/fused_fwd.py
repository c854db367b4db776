"""Stage 2 of the Hopper GDN prefill: the state walk and the output, fused and warp-specialised,
reading and writing the engine's state pool by index. This is the "RS" walk: the
state lives in registers as the A operand of wgmma. Measured on the H200 in session 5
(bench_serving/results/h200-session5/): GPU tests 17 of 17 (V-block 32 refused), errors as main's;
9–11 % faster than main's walk on 1×32768 rows, ±2 % at 8192×4, 6–7 % slower at V-block 128.

A (V block, value head, sequence) item walks the sequence's 64-token chunks in order (see "Work
items"). The state is kept transposed, X = Sᵀ ([V rows, K], the pool's "vk" orientation), 64 V rows
per consumer warpgroup in fp32 registers. Per chunk, with Q, K [64, K], V [64, BV], Aβ and γ from
:mod:`kkt_solve` (tensor-core operands in the input dtype (bf16) or fp16 as marked, fp32 accumulators):
    P = scale · (Q Kᵀ ⊙ D_incl)                      (chunk-only: WG_P, one chunk ahead; fp16)
    [(K S)ᵀ | (Q S)ᵀ] = X [Kᵀ | Qᵀ]                    (one N = 128 product; X rounded to bf16 as the A operand)
    Wᵀ  = Vᵀ − (K S)ᵀ ⊙ e^{γ_j} per column j           (in registers, rounded once to fp16)
    Uᵀ  = Wᵀ Aβᵀ                                      (fp16 operands: Aβ arrives in fp16)
    Uᵀ[:, i ≥ nvalid] = 0                             (a select)
    X  ← e^{γ_C} X + (Uᵀ ⊙ e^{γ_C − γ_i} per column i) K   (A = that Uᵀ in bf16 registers)
    Oᵀ  = scale · (Q S)ᵀ ⊙ e^{γ_i} per column + Uᵀ Pᵀ  (A = Uᵀ in fp16 registers)
Only differences γ_i − γ_j ≤ 0 are exponentiated. W, U, S never touch HBM, and neither S nor U
goes through shared memory: the serial chain of a consumer is X [Kᵀ | Qᵀ] (RS 64×128×128) → W in
registers → Wᵀ Aβᵀ (RS 64×64×64) → select/scale/round → X update (RS 64×128×64), then Uᵀ Pᵀ (RS
64×64×64), with no cross-warpgroup hand-off. Its only waits are for inputs: the loaded chunk and,
before the output's last GEMM, WG_P's P (one chunk ahead, double-buffered). This is FlashInfer's form
(W is never a GEMM of its own). Before session 42 the chain had six products: X Kᵀ, Vᵀ Aβᵀ (SS) plus
((K S)ᵀ ⊙ e^γ) Aβᵀ (V kept exact, the state term rounded to bf16), the update, then X_old Qᵀ and Uᵀ
Pᵀ; W rounded in bf16 alone would have cost precision (×1.06–1.18 on o and state in CPU emulation),
in fp16 it gains (o ×0.22–0.67, state ×0.70–0.76: see HALF). The walk before session 5's had WG_P make
−Wₖ = −Aβ diag(e^γ) K for the consumers, and their largest stall was the wait for it (session 9's
ncu profile, 16/32 8192×4). Every GEMM is synchronous (wgmma + wait<0>).
An asynchronous issue order at BV 64 (X_old Qᵀ beside the Uᵀ epilogue) measured 0–3 % slower and was
dropped, and so were three input buffers (no faster: load latency is not this walk's limit).
tests/test_rs_math.py emulates exactly this math in fp64 against the token oracle.

TileLang 0.1.15 takes the fp32 accumulator layout of one wgmma as the bf16 A-operand fragment of the next
(``T.copy(acc_f32, acc_bf16)`` is a per-thread conversion, no shuffles; every chain GEMM lowers to
``wgmma_rs``), because each product is oriented with M = the 64 V rows: X [64, K] is the accumulator
of the update (N = K) and the A operand of X [Kᵀ | Qᵀ] (K-dim = K); Uᵀ [64, C] is the accumulator of
Wᵀ Aβᵀ (N = C) and the A operand of the update and of Uᵀ Pᵀ (K-dim = C). Vᵀ enters the registers in
that layout by ``ldmatrix.trans`` from the swizzled V tile (:func:`load_vt`), issued before X [Kᵀ | Qᵀ]
so that they land under it, and Oᵀ leaves it by ``stmatrix.trans`` into the O tile (:func:`store_ot`):
4 matrix instructions each per consumer and chunk where there were 32 scalar shared loads and 32
scalar stores (session 43; 16/32 static SASS of the consumers 757 → 663 at V-block 64, with the
select on partial chunks only).

Warpgroups (BV = 64: 384 threads, one consumer; BV = 128: 512 threads, two consumers), mbarriers:
    consumer w (threads 128w …)  V rows v0 + 64w …: loads its X rows from the pool, walks the chain,
                             writes Oᵀ transposed into its 64 columns of the O tile, stores X back.
    WG_P   (next 128)        l2norm of q, k in place (if asked), then P into double-buffered shared
                             tiles.
    WG_IO  (last 128)        three loader warps (TMA, double-buffered; a sequence's last chunk is loaded
                             whole too: see "Rows past a sequence's end"; V per consumer as separate
                             64-column tiles; the γ warp also makes the vectors e^γ and e^{γ_C−γ}) and one
                             warp storing O.
Register split (setmaxnreg, consumers / WG_P / WG_IO): 240 / 160 / 32 at BV 64, 208 / 64 / 32 at BV 128 (see NREG).
Rows past a sequence's end (its last, partial chunk): q/k/v rows there hold the next sequence's
(finite) data or TMA's zero fill, Aβ rows that or, in blocks kkt_solve never writes (above the next
sequence's diagonal: kkt_solve.ABETA_PANEL), any bits, NaN included; γ repeats the last valid value, so
every exponent stays ≤ 0; Aβ's columns past the end are zero (kkt_solve pads β with 0), so no valid row
mixes them in; Uᵀ's columns past the end are replaced by zeros with a select (on that chunk only: a
product with a mask would keep a NaN) before they reach Uᵀ Pᵀ or the state; O's rows there are not stored.
Aβ's tile (``a_s``) is loaded as the lower-triangular 16-row blocks kkt_solve writes, four TMA boxes a
chunk; its blocks above the diagonal are zeroed once by the loader warp and never loaded.
Barrier protocol (each barrier once per use of its buffer, so its wait parity is the use count's parity):
    ready[b] / free[b]       loaders → (consumers, WG_P) / back: input buffer b = c mod 2
    w_ready[b]               WG_P → consumers: q, k of chunk c normalised in place (in-kernel l2norm only)
    p_ready[b] / w_free[b]   WG_P → consumers / back: P of chunk c in buffer b
    o_ready / o_free         consumers → store warp / back: the bf16 O tile in shared
Waiting on parity (use+1) mod 2 of a "free" barrier passes at once for the first use (a fresh mbarrier
counts its phase before the first as complete) and otherwise waits for the previous use's release.

Phases (compile-time): 0 = the prefill proper; 1 and 3 serve exact intra-card context parallelism
(:mod:`cp`): phase 1 walks partitions without output into a scratch buffer — row r < NSP from S = 0
with the real V (gives h_r), row NSP + r from S = I with V ≡ 0 (gives the K×K transition M_r);
phase 3 walks virtual sequences from fp32 start states in the same buffer (the combine's rows, or
the previous partition's h where that was a tail start), gathers each one's slot itself
(``state_indices[seq_of_v]``), and stores the final state to the pool only on each sequence's last
partition.

Pool handling (phases 0, 3): ``slot < 0`` or ``slot == null_slot`` → zero output, no pool access.
Phase 0 starts from ``pool[slot]`` (or zero when ``has_initial_state[n]`` is 0: no memset) and
writes the final state back to ``pool[slot]`` in the pool's dtype, any ``stride(0)``, layout "vk"
(pool [slots, HV, V, K]: X is a pool row block) or "kv" (pool [slots, HV, K, V]: loaded and stored
transposed, once per sequence, with plain strided accesses). fp32 rows enter X through an exact ×1
(``__fmul_rn``), the previous walk's fix for a ptxas spill. The persistent form stores a "vk" pool's
final state two elements a store (``STATE_HELPERS``: its pool is 16-byte aligned); TileLang's own copy
stores one at a time. Measured on an H100 (session 63, ``results/h200-session63``): GPU time
×0.77–0.93 at 256×1+4096, ×0.82–0.92 at 64×128, ×0.87–0.95 at 16×512, ×0.98–1.00 at 8192×4.

Work items: (V block, value head, sequence), one chunk walk each. Phases 1 and 3 launch one CTA per
item, grid (V / BV, HV, sequences). Phase 0 has a second, *persistent* form (the host plan picks it:
``plan_hopper``): ``num_ctas`` CTAs (one per SM: shared memory and registers leave room for no
second) deal the N·HV·(V/BV) items out in rounds, sequences longest first (the plan's ``seq_order``),
every other round in reverse. Every warp role loops over the same items in the same order and counts
the CTA's chunks across them (``cnt``), so buffer indices and barrier parities run on through item
boundaries: the loaders and WG_P start the next item's first chunks while the consumers finish the
current one. Measured on the H200 (session 9): GPU time ×0.85–0.92 where items are one or two
chunks long (64×128, 256×1+4096), within ±3 % elsewhere, ×1.06 where one sequence's items are much
longer than the rest (the static deal keeps loading their CTAs; the block scheduler does not), so
the plan takes it only where no item outlasts the mean CTA's share.
The persistent form also prefetches each item's start: the Aβ loader warp writes the item's fields
into shared and TMA-loads its start state from the pool into shared (``x_s``, pool dtype and
layout) as soon as the consumers have taken the previous item's, so an item boundary waits neither
for the table reads nor for the pool. Its pool must be TMA-readable (base address and slot stride
multiples of 16 bytes: ``hopper.pool_takes_tma``; any other pool runs one CTA per item).
Measured on the H200 (session 29, ``results/h200-session29/prefetch-ab``): qla_ms ×0.84–0.86 at
64×128 (16/32, 16/64), ×0.85–0.88 at 256×1+4096, ×0.95–0.98 at 16×512 and 1024×8, ×0.99 at 8192×4.
BV ∈ {64, 128}. BV = 32 raises ValueError in this version (a consumer owns 64 V rows: wgmma's M).
T, N and the pool's row count and stride are dynamic; token strides of q/k/v/out are compile-time
(TMA descriptors and 16-byte stores; a stride that is not a multiple of 16 bytes falls back to
plain loads).
"""

import os

import tilelang
import tilelang.language as T
from tilelang.layout import make_full_bank_swizzled_layout, make_quarter_bank_swizzled_layout

from .kkt_solve import ABETA_PANEL

CHUNK = 64
# Every cross-warpgroup hazard is ordered by the mbarriers below and every hazard inside a
# warpgroup by an explicit named barrier (BAR_P), so TileLang's automatic shared-memory sync pass
# is off: it cannot prove the warpgroup branches warp-uniform and refuses the kernel.
PASS_CONFIGS = {tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: False,
                tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True}
LOG2E = 1.4426950408889634
# The two products whose operands are both computed here, Wᵀ Aβᵀ and Uᵀ Pᵀ, take fp16 operands (Aβ
# from kkt_solve and P from WG_P in fp16 too): with unit-norm keys |Aβ| ≤ 1 and |P| ≤ scale, and W, U
# are of the values' size, so fp16's 11-bit significand rounds them 8× finer than bf16 inside its
# range (|W| < 65504: values far beyond any model's). The products with K and Q (model inputs) stay in
# the input dtype. CPU emulation (results/h200-session42/exp/w_rounding.py): errors of
# o ×0.22-0.67 and state ×0.70-0.76 of the bf16 two-product form before session 42, where W rounded
# in bf16 was ×1.06-1.18.
HALF = "float16"
# ldmatrix / stmatrix .trans on a register array given as (base, element offset): TileLang's
# fragment accesses outside T.Parallel make the fragment replicated, so the consumers hand these
# the fragment's storage itself (its local layout is fixed by the wgmma that shares it: see matrices_trans).
MATRIX_HELPERS = r"""
__device__ __forceinline__ void qla_ldmatrix_x4_trans(const void* smem, void* regs, int offset) {
  unsigned int* r = reinterpret_cast<unsigned int*>(reinterpret_cast<unsigned short*>(regs) + offset);
  unsigned int a = static_cast<unsigned int>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.x4.trans.m8n8.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void qla_stmatrix_x4_trans(void* smem, const void* regs, int offset) {
  const unsigned int* r = reinterpret_cast<const unsigned int*>(reinterpret_cast<const unsigned short*>(regs) + offset);
  unsigned int a = static_cast<unsigned int>(__cvta_generic_to_shared(smem));
  asm volatile("stmatrix.sync.aligned.x4.trans.m8n8.shared.b16 [%0], {%1, %2, %3, %4};\n"
               :: "r"(a), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
}
"""
# The final state from a consumer's X fragment [64, K = 128] (fp32, wgmma accumulator layout) into
# its 64 pool rows ("vk": each row K contiguous elements), one 8-byte float pair (or 4-byte bf16 pair)
# a store: the fragment's local element 4·kk + 2·h + p is X[16·wp + 8·h + t/4, 8·kk + 2·(t%4) + p]
# (see matrices_trans), so each thread's pairs are column-adjacent. TileLang's own copy stores one
# element at a time, since it cannot prove a runtime slot stride keeps pairs aligned (session 62's
# ncu, 16/32 64×128: 64 STG.E a thread, the consumers' largest stall, lg_throttle). Used where the
# pool is 16-byte aligned in base and slot stride (the persistent walk: hopper.pool_takes_tma).
STATE_HELPERS = r"""
__device__ __forceinline__ void qla_store_state_pairs_f32(void* row0, const void* frag) {
  const float* x = reinterpret_cast<const float*>(frag);
  const int lane = threadIdx.x % 32, wp = threadIdx.x / 32 % 4;
  float* base = reinterpret_cast<float*>(row0) + (16 * wp + lane / 4) * 128 + 2 * (lane % 4);
  #pragma unroll
  for (int kk = 0; kk < 16; ++kk) {
    #pragma unroll
    for (int h = 0; h < 2; ++h)
      *reinterpret_cast<float2*>(base + 8 * h * 128 + 8 * kk) = make_float2(x[4 * kk + 2 * h], x[4 * kk + 2 * h + 1]);
  }
}
// bf16 pools: both values rounded to nearest even by one cvt.rn.bf16x2.f32, the instruction that
// TileLang's per-element cast (CUTLASS's bfloat16_t on sm_90) runs once per value; lower half = lower address.
__device__ __forceinline__ void qla_store_state_pairs_bf16(void* row0, const void* frag) {
  const float* x = reinterpret_cast<const float*>(frag);
  const int lane = threadIdx.x % 32, wp = threadIdx.x / 32 % 4;
  unsigned short* base = reinterpret_cast<unsigned short*>(row0) + (16 * wp + lane / 4) * 128 + 2 * (lane % 4);
  #pragma unroll
  for (int kk = 0; kk < 16; ++kk) {
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
      unsigned int packed;
      asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(x[4 * kk + 2 * h + 1]), "f"(x[4 * kk + 2 * h]));
      *reinterpret_cast<unsigned int*>(base + 8 * h * 128 + 8 * kk) = packed;
    }
  }
}
"""
BAR_P = 2                # named barrier id (0 is __syncthreads) for WG_P's 128 threads
WG_ROWS = 64             # V rows of the state per consumer warpgroup (the wgmma M)
# Register split (setmaxnreg), per V-block: (consumers, WG_P, WG_IO). The CTA's pool is
# threads × (registers at launch: 65536 / threads, rounded down to 8) and the split must fit in it.
# A consumer holds X fp32 [64, 128] (64 a thread), its bf16 copy (32), Uᵀ (32), Oᵀ (32), Uᵀ bf16 (16).
# WG_IO needs 32 (at 24 its loader warps spill). At V-block 128 the consumers spilled inside the
# chunk loop at 176 (`bench_serving/sass_count.py --block-v 128 --pool-dtype bfloat16`, 16/32:
# 129 STL / 147 LDL in the consumers; fewer with an fp32 pool): a slice of X lived in local memory
# and went through L1 every chunk. At 208 they have none; WG_P, whose largest tile is P (32 a
# thread), has 3 / 6 at 64, off the chain. GPU time ×0.93–0.96 on long rows (session 24).
NREG = {64: (240, 160, 32),           # 384 threads, 168 at launch: 240 + 160 + 32 ≤ 3 × 168
        128: (208, 64, 32)}           # 512 threads, 128 at launch: 2 × 208 + 64 + 32 ≤ 4 × 128
# With l2norm inside the walk (QLA_L2NORM=kernel, an A/B aid) WG_P also holds a [64, 128] fp32 tile.
NREG_IN_KERNEL_L2NORM = {**NREG, 128: (176, 128, 32)}


def build_fused_fwd(H: int, HV: int, K: int, V: int, block_v: int, in_dtype: str, pool_dtype: str,
                    state_layout: str, use_qk_l2norm: bool, read_has_initial_state: bool,
                    scale: float, strides: tuple[int, int, int, int], phase: int = 0,
                    persistent: bool = False, tail_start: bool = False):
    """TileLang prim_func for one variant. ``state_layout``: "vk" (pool [slots, HV, V, K]) or "kv".

    ``strides``: token strides of q, k, v, out (elements). They are compile-time so that loads and
    stores vectorise (an engine's q/k/v views of its packed qkv buffer have one fixed stride per
    model). ``phase``: 0 prefill, 1 CP partials, 3 CP output from start states (see module doc).
    ``block_v`` 64 or 128 (one or two consumer warpgroups); 32 raises ValueError in this version.
    ``persistent`` (phase 0 only): one CTA per SM walks a list of work items (see "Work items").
    ``tail_start`` (phase 1 only; CP calls on unit-norm keys): the partials kernel takes
    ``tail [NSP, HV]`` int32 (:func:`cp.tail_chunks`): where it is w > 0, the partition's h walks only
    its last w chunks from S = 0 and its transition M is stored as 0 (both exact to fp32: see
    :mod:`cp`, "Tail starts"); where it is 0, the exact walk as without it."""
    if phase not in (0, 1, 3):
        raise ValueError(f"phase must be 0, 1 or 3, got {phase}")
    if persistent and phase != 0:
        raise ValueError("only phase 0 has a persistent form")
    if tail_start and phase != 1:
        raise ValueError("only phase 1 (CP partials) takes tail starts")
    if K != 128 or V % block_v or block_v not in (64, 128):
        raise ValueError(f"unsupported K={K}, V={V}, block_v={block_v} (the RS walk takes V-blocks 64 and 128)")
    C = CHUNK
    G = HV // H
    BV = block_v
    NV = V // BV
    NW = BV // WG_ROWS              # consumer warpgroups, 64 V rows each
    R = WG_ROWS
    P0 = NW * 128                   # first thread of WG_P
    IO0 = P0 + 128                  # first thread of WG_IO
    threads = IO0 + 128
    nreg_c, nreg_p, nreg_io = (NREG_IN_KERNEL_L2NORM if use_qk_l2norm else NREG)[BV]
    # setmaxnreg.inc below the launch allocation (or .dec above it) is an illegal instruction on
    # the H200 (seen at BV 64: WG_P's 160 < 168 at launch), so the direction follows the count.
    launch_regs = min(255, 65536 // threads // 8 * 8)
    inc_c, inc_p, inc_io = (int(n >= launch_regs) for n in (nreg_c, nreg_p, nreg_io))
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
    n_free = NW * 128 + 128         # consumers and WG_P release an input buffer

    @T.macro
    def load_x(buf, row, bh, v0w, X):
        """X [R, K] (= Sᵀ rows v0w …, "vk" orientation) from buf[row, bh] (any layout, any dtype)."""
        if buf.dtype == "float32":
            # An fp32 row loaded straight into the state's registers made ptxas spill in the
            # previous walk; routed through an explicit ×1 (exact) it did not. Rows past the
            # buffer read as zero.
            if row < buf.shape[0]:
                if vk:
                    for i, j in T.Parallel(R, K):
                        X[i, j] = T.call_extern("float32", "__fmul_rn", buf[row, bh, v0w + i, j], T.float32(1.0))
                else:
                    for i, j in T.Parallel(R, K):
                        X[i, j] = T.call_extern("float32", "__fmul_rn", buf[row, bh, j, v0w + i], T.float32(1.0))
            else:
                T.clear(X)
        elif vk:
            T.copy(buf[row, bh, v0w:v0w + R, 0:K], X)
        else:
            for i, j in T.Parallel(R, K):
                X[i, j] = T.cast(buf[row, bh, j, v0w + i], accum)

    @T.macro
    def store_x(buf, row, bh, v0w, X):
        if vk:
            T.copy(X, buf[row, bh, v0w:v0w + R, 0:K])
        else:
            # "kv": the transposed store (strided; once per sequence)
            for i, j in T.Parallel(R, K):
                buf[row, bh, j, v0w + i] = T.cast(X[i, j], buf.dtype)

    @T.macro
    def l2norm_rows(tile_s, xf, rn):
        # tile_s [C, K] in shared, normalised in place (fp32 math); rows are tokens.
        T.copy(tile_s, xf)
        for i, j in T.Parallel(C, K):
            xf[i, j] = xf[i, j] * xf[i, j]
        T.reduce_sum(xf, rn, dim=1)
        T.copy(tile_s, xf)
        for i, j in T.Parallel(C, K):
            xf[i, j] = xf[i, j] * T.rsqrt(rn[i] + 1e-6)
        T.copy(xf, tile_s)

    @T.macro
    def matrices_trans(helper, tile_at, frag):
        """One [R, C] fragment of the chain to or from a [C tokens, 64 V rows] shared tile by
        ``ldmatrix`` / ``stmatrix`` .trans (``helper``: a function of MATRIX_HELPERS; ``tile_at(token,
        v)`` the tile's element, a logical address TileLang swizzles, which moves whole 16-byte rows
        of a matrix, so each lane's row stays contiguous). The fragment has the wgmma accumulator
        layout (as every [R, C] fragment of the chain): thread t of warp wp holds local element
        4·kk + 2·h + p = fragment[16·wp + 8·h + t/4, 8·kk + 2·(t%4) + p], which is what the .trans
        forms hand thread t of the 8×8 matrix (tokens 8kk…, V rows 16wp + 8h…). One x4 instruction
        moves the matrices (kk, h) = (2s + m/2, m%2) for m = 0..3, lanes 8m…8m+7 giving their eight
        token rows: 4 instructions where there were 32 scalar shared accesses. The fragment goes in
        as its storage (frag.data): an element access outside T.Parallel would make TileLang
        replicate it."""
        lane = T.get_thread_binding() % 32
        wp = T.get_thread_binding() // 32 % 4
        m = lane // 8
        for s in T.unroll(C // 16):
            T.call_extern("handle", helper, tile_at(16 * s + 8 * (m // 2) + lane % 8, 16 * wp + 8 * (m % 2)),
                          frag.data, 8 * s)

    @T.macro
    def load_vt(w, b, v_s, vt):
        """vt [R, C] = consumer w's Vᵀ from v_s[b, w] ([C tokens, R] in shared)."""
        matrices_trans("qla_ldmatrix_x4_trans", lambda t, v: T.access_ptr(v_s[b, w, t, v], "r", extent=8), vt)

    @T.macro
    def store_ot(w, ob, o_s):
        """o_s[:, 64w …] = obᵀ ([R, C], the input dtype), into o_s's layout (whatever swizzle
        TileLang gave it for the TMA store)."""
        matrices_trans("qla_stmatrix_x4_trans", lambda t, v: T.access_ptr(o_s[t, w * R + v], "w", extent=8), ob)

    @T.macro
    def consumer(w, X, Xb, vt, xkq, uT, ub, un, oT, decay, cnt, kq_s, v_s, a_s, g_s, eg_s, egl_s, p_s, o_s,
                 ready, free, w_ready, p_ready, w_free, o_ready, o_free, src, dst, n_items, item_at, item_ctx,
                 itm, transition, x_s, itm_s, xs_ready, xs_free):
        """Consumer warpgroup w: V rows 64w … of each item's block. Its chain, per chunk, in registers:
        (K S)ᵀ = X Kᵀ → Uᵀ = Vᵀ Aβᵀ − ((K S)ᵀ ⊙ e^γ) Aβᵀ → mask → X ← e^{γ_C} X + (Uᵀ ⊙ e^{γ_C−γ}) K;
        beside it Oᵀ."""
        T.set_max_nreg(nreg_c, inc_c)
        cnt[0] = 0
        for it in T.serial(n_items):
            if x_s is not None:
                # the item's fields and start state, as the Aβ loader warp left them in shared
                T.barrier_wait(xs_ready, it % 2)
                for f in T.unroll(9):
                    itm[f] = itm_s[f]
            else:
                item_at(it, item_ctx, itm)
            bv = itm[0]
            bh = itm[1]
            bos = itm[2]
            eos = itm[3]
            nloop = itm[4]
            init_mode = itm[5]
            src_row = itm[6]
            dst_row = itm[7]
            do_store = itm[8]
            v0w = bv * BV + w * R
            if x_s is not None:
                if init_mode == 1:
                    if vk:
                        for i, j in T.Parallel(R, K):
                            X[i, j] = T.cast(x_s[w * R + i, j], accum)
                    else:
                        for i, j in T.Parallel(R, K):
                            X[i, j] = T.cast(x_s[j, w * R + i], accum)
                else:
                    T.clear(X)
                T.barrier_arrive(xs_free)
            elif init_mode == 1:
                load_x(src, src_row, bh, v0w, X)
            elif init_mode == 2:
                # the identity S = I (CP transition rows): X[v, k] = (v0w + v == k)
                for i, j in T.Parallel(R, K):
                    X[i, j] = T.if_then_else(v0w + i == j, 1.0, 0.0)
            else:
                T.clear(X)
            for c in T.serial(nloop):
                u = cnt[0] + c                              # the CTA's chunk count: buffer and parity
                b = u % 2
                T.barrier_wait(ready[b], (u // 2) % 2)
                if use_qk_l2norm:
                    T.barrier_wait(w_ready[b], (u // 2) % 2)    # q, k of this chunk normalised by WG_P
                T.copy(X, Xb)                                   # the state as the bf16 A operand
                if not transition:
                    # this consumer's Vᵀ, read from shared before X Kᵀ so that the loads' latency
                    # hides under that product
                    load_vt(w, b, v_s, vt)
                # (K S)ᵀ = X Kᵀ (RS), then Wᵀ = Vᵀ − (K S)ᵀ ⊙ e^{γ_j} rounded once to bf16: the A
                # operand of Uᵀ = Wᵀ Aβᵀ (RS). One product with Aβ, not Vᵀ Aβᵀ (SS) plus a second one
                # for the K S term: W never leaves registers (FlashInfer's and FlashQLA's form; FLA
                # rounds its v_new to bf16 the same way). With output, X Qᵀ comes from the same
                # product: X [Kᵀ | Qᵀ] (N = 128: K and Q are one shared tile), one wgmma batch and
                # one wait where there were two, and the old state's bf16 copy is dead after it.
                if with_output:
                    T.gemm(Xb, kq_s[b, :, :], xkq, transpose_B=True, clear_accum=True)
                    for i, j in T.Parallel(R, C):
                        ub[i, j] = T.cast(T.cast(vt[i, j], accum) - xkq[i, j] * eg_s[b, j], HALF)
                    # Oᵀ = scale · (X_old Qᵀ) ⊙ e^{γ_j}, completed by Uᵀ Pᵀ below
                    for i, j in T.Parallel(R, C):
                        oT[i, j] = xkq[i, C + j] * (scale * eg_s[b, j])
                else:
                    T.gemm(Xb, kq_s[b, 0:C, :], uT, transpose_B=True, clear_accum=True)
                    if transition:
                        for i, j in T.Parallel(R, C):
                            ub[i, j] = T.cast(-uT[i, j] * eg_s[b, j], HALF)
                    else:
                        for i, j in T.Parallel(R, C):
                            ub[i, j] = T.cast(T.cast(vt[i, j], accum) - uT[i, j] * eg_s[b, j], HALF)
                T.gemm(ub, a_s[b, :, :], uT, transpose_B=True, clear_accum=True)
                # Columns past eos came from the next sequence's Aβ: zero them (a select, not a
                # product) so they reach neither Uᵀ Pᵀ nor the state.
                nvalid = T.min(eos - bos - c * C, C)
                if nvalid < C:          # only a sequence's partial last chunk (a warp-uniform branch)
                    for i, j in T.Parallel(R, C):
                        uT[i, j] = T.if_then_else(j < nvalid, uT[i, j], 0.0)
                if with_output:
                    T.copy(uT, ub)                              # Uᵀ (fp16) for Uᵀ Pᵀ
                for i, j in T.Parallel(R, C):
                    uT[i, j] = uT[i, j] * egl_s[b, j]
                T.copy(uT, un)                                  # e^{γ_C−γ} ⊙ Uᵀ (bf16)
                # e^γ of the chunk's last valid token (the loader pads a short chunk with it): the
                # loader's eg_s holds it already, the same expf of the same γ, so no exp on the chain
                decay[0] = eg_s[b, C - 1]
                for i, j in T.Parallel(R, K):
                    X[i, j] = X[i, j] * decay[0]
                # X ← e^{γ_C} X + (e^{γ_C−γ} ⊙ Uᵀ) K (RS): the chain's last step
                T.gemm(un, kq_s[b, 0:C, :], X, clear_accum=False)
                if with_output:
                    T.barrier_wait(p_ready[b], (u // 2) % 2)    # P of this chunk (WG_P)
                    T.gemm(ub, p_s[b, :, :], oT, transpose_B=True, clear_accum=False)
                T.barrier_arrive(w_free[b])
                T.barrier_arrive(free[b])
                if with_output:
                    T.copy(oT, un)                              # Oᵀ in the input dtype (un is free)
                    T.barrier_wait(o_free, (u + 1) % 2)
                    # Oᵀ written transposed into the O tile for the store warp
                    store_ot(w, un, o_s)
                    T.fence_proxy_async()       # the store warp may read o_s with TMA
                    T.barrier_arrive(o_ready)
            if do_store != 0:
                if x_s is not None and vk and K == 128 and dst.dtype in ("float32", "bfloat16"):
                    T.call_extern("handle", "qla_store_state_pairs_" + ("f32" if dst.dtype == "float32" else "bf16"),
                                  T.access_ptr(dst[dst_row, bh, v0w, 0], "w", extent=R * K), X.data)
                else:
                    store_x(dst, dst_row, bh, v0w, X)
            cnt[0] = cnt[0] + nloop

    @T.macro
    def walk(q, k, v, gcum, a, out, src, dst, n_items, item_at, item_ctx, transition, prefetch_state=False):
        """The chunk walks of this CTA's items — see the module doc. ``item_at(it, item_ctx, itm)`` writes the it-th
        item's (bv, bh, bos, eos, nloop, init_mode, src_row, dst_row, do_store) into ``itm``: init_mode 0 zero
        start, 1 start from src[src_row], 2 identity (CP transition rows); do_store: write the final
        state to dst[dst_row]. transition: V ≡ 0 (CP phase 1; one item per CTA there).
        prefetch_state (the persistent form): the Aβ loader warp puts each item's fields (itm_s) and
        start state (x_s, TMA, in the pool's dtype and layout) in shared as soon as the consumers
        have taken the previous item's, so at an item boundary the consumers wait neither for the
        table reads nor for the pool (xs_ready / xs_free, once per item)."""
        T.import_source(MATRIX_HELPERS + (STATE_HELPERS if prefetch_state else ""))
        B = ABETA_PANEL
        assert C == 4 * B       # Aβ's four panel loads below
        kq_s = T.alloc_shared((2, 2 * C, K), in_dtype)    # rows 0..C-1: K, rows C..2C-1: Q
        v_s = T.alloc_shared((2, NW, C, R), in_dtype)  # each consumer's 64 V columns
        a_s = T.alloc_shared((2, C, C), HALF)
        g_s = T.alloc_shared((2, C), accum)
        eg_s = T.alloc_shared((2, C), accum)          # e^{γ_j}
        egl_s = T.alloc_shared((2, C), accum)         # e^{γ_C − γ_i}
        p_s = T.alloc_shared((2, C, C), HALF)         # P = scale · (Q Kᵀ ⊙ D_incl)
        o_s = T.alloc_shared((C, BV), in_dtype)
        x_s = T.alloc_shared((BV, K) if vk else (K, BV), src.dtype) if prefetch_state else None
        itm_s = T.alloc_shared((9,), "int32") if prefetch_state else None
        # V is no longer a wgmma operand, so nothing would swizzle it: the consumers' transposed
        # reads (4 tokens × 8 V columns a warp load) would hit one bank four times. A 128-byte
        # swizzle (one V row of 64 bf16 is one 128-byte line; TMA writes it swizzled) spreads them.
        T.annotate_layout({v_s: make_full_bank_swizzled_layout(v_s)})
        # Aβ in 16-column panels (32-byte swizzle), kkt_solve's output layout: each panel's lower
        # rows are one TMA box (kkt_solve.ABETA_PANEL).
        T.annotate_layout({a_s: make_quarter_bank_swizzled_layout(a_s)})

        ready = T.alloc_barrier(arrive_count=[96, 96])
        free = T.alloc_barrier(arrive_count=[n_free, n_free])
        w_ready = T.alloc_barrier(arrive_count=[128, 128])   # q, k normalised (only with in-kernel l2norm)
        p_ready = T.alloc_barrier(arrive_count=[128, 128])
        w_free = T.alloc_barrier(arrive_count=[NW * 128, NW * 128])
        o_ready = T.alloc_barrier(arrive_count=NW * 128)
        o_free = T.alloc_barrier(arrive_count=32)
        xs_ready = T.alloc_barrier(arrive_count=32) if prefetch_state else None
        xs_free = T.alloc_barrier(arrive_count=NW * 128) if prefetch_state else None

        X0 = T.alloc_fragment((R, K), accum)              # consumer 0: X = Sᵀ rows, fp32
        Xb0 = T.alloc_fragment((R, K), in_dtype)          # its bf16 copy (the A operand)
        vt0 = T.alloc_fragment((R, C), in_dtype)          # Vᵀ of its 64 V columns
        xkq0 = T.alloc_fragment((R, 2 * C), accum)        # X [Kᵀ | Qᵀ]
        uT0 = T.alloc_fragment((R, C), accum)
        ub0 = T.alloc_fragment((R, C), HALF)              # Wᵀ, then Uᵀ (fp16 operands: see HALF)
        un0 = T.alloc_fragment((R, C), in_dtype)          # e^{γ_C−γ} ⊙ Uᵀ (bf16) for the state
        oT0 = T.alloc_fragment((R, C), accum)
        decay0 = T.alloc_local((1,), accum)
        X1 = T.alloc_fragment((R, K), accum)              # consumer 1 (V-block 128)
        Xb1 = T.alloc_fragment((R, K), in_dtype)
        vt1 = T.alloc_fragment((R, C), in_dtype)
        xkq1 = T.alloc_fragment((R, 2 * C), accum)
        uT1 = T.alloc_fragment((R, C), accum)
        ub1 = T.alloc_fragment((R, C), HALF)
        un1 = T.alloc_fragment((R, C), in_dtype)
        oT1 = T.alloc_fragment((R, C), accum)
        decay1 = T.alloc_local((1,), accum)
        cnt = T.alloc_local((1,), "int32")                # chunks walked by this CTA (each thread its own)
        itm = T.alloc_local((9,), "int32")                # the current item's fields (see item_at)
        p = T.alloc_fragment((C, C), accum)
        xf = T.alloc_fragment((C, K), accum)
        rn = T.alloc_fragment((C,), accum)
        g_row = T.alloc_fragment((C,), accum)             # WG_P: γ of P's rows and columns
        g_col = T.alloc_fragment((C,), accum)

        tx = T.get_thread_binding()
        if tx < P0:
            if NW == 1:
                consumer(0, X0, Xb0, vt0, xkq0, uT0, ub0, un0, oT0, decay0, cnt, kq_s, v_s, a_s, g_s, eg_s, egl_s,
                         p_s, o_s, ready, free, w_ready, p_ready, w_free, o_ready, o_free, src, dst, n_items,
                         item_at, item_ctx, itm, transition, x_s, itm_s, xs_ready, xs_free)
            else:
                if tx < 128:
                    consumer(0, X0, Xb0, vt0, xkq0, uT0, ub0, un0, oT0, decay0, cnt, kq_s, v_s, a_s, g_s, eg_s, egl_s,
                             p_s, o_s, ready, free, w_ready, p_ready, w_free, o_ready, o_free, src, dst,
                             n_items, item_at, item_ctx, itm, transition, x_s, itm_s, xs_ready, xs_free)
                else:
                    consumer(1, X1, Xb1, vt1, xkq1, uT1, ub1, un1, oT1, decay1, cnt, kq_s, v_s, a_s, g_s, eg_s, egl_s,
                             p_s, o_s, ready, free, w_ready, p_ready, w_free, o_ready, o_free, src, dst,
                             n_items, item_at, item_ctx, itm, transition, x_s, itm_s, xs_ready, xs_free)
        elif tx < IO0:
            # ---------------- WG_P: chunk-only products, one chunk ahead ----------------
            T.set_max_nreg(nreg_p, inc_p)
            cnt[0] = 0
            for it in T.serial(n_items):
                item_at(it, item_ctx, itm)
                nloop = itm[4]
                for c in T.serial(nloop):
                    u = cnt[0] + c
                    b = u % 2
                    T.barrier_wait(ready[b], (u // 2) % 2)
                    if use_qk_l2norm:
                        l2norm_rows(kq_s[b, C:2 * C, :], xf, rn)
                        l2norm_rows(kq_s[b, 0:C, :], xf, rn)
                        T.fence_proxy_async()
                        T.sync_threads(BAR_P, 128)
                        T.barrier_arrive(w_ready[b])            # the consumers' X Kᵀ may read K now
                    if with_output:
                        T.barrier_wait(w_free[b], (u // 2 + 1) % 2)
                        # P = scale · (Q Kᵀ ⊙ D_incl). The mask runs on registers and stores once, in
                        # pairs. Read between the p_s stores, γ_i and γ_j were reloaded from shared
                        # memory for every element (a store may alias them), and a branch around each
                        # exp cost three control instructions; now the exp runs for every element
                        # (argument 0 above the diagonal) and the mask is a select. Same values, bit for
                        # bit; WG_P's chunk loop 902 → 681 SASS instructions (16/32, V-block 64).
                        T.gemm(kq_s[b, C:2 * C, :], kq_s[b, 0:C, :], p, transpose_B=True, clear_accum=True)
                        for i in T.Parallel(C):
                            g_row[i] = g_s[b, i] * LOG2E
                        for j in T.Parallel(C):
                            g_col[j] = g_s[b, j] * LOG2E
                        # e^x as exp2f of log2e-scaled γ, where expf's range reduction cost ~10
                        # instructions an element: WG_P's chunk loop 688 → 544 SASS instructions
                        # (16/32, V-block 128)
                        for i, j in T.Parallel(C, C):
                            p[i, j] = p[i, j] * (scale * T.exp2(T.if_then_else(j <= i, g_row[i] - g_col[j], 0.0)))
                        for i, j in T.Parallel(C, C):
                            p[i, j] = T.if_then_else(j <= i, p[i, j], 0.0)
                        for i, j in T.Parallel(C, C):
                            p_s[b, i, j] = T.cast(p[i, j], HALF)
                        T.fence_proxy_async()
                        T.barrier_arrive(p_ready[b])
                    T.barrier_arrive(free[b])
                cnt[0] = cnt[0] + nloop

        else:
            # ---------------- WG_IO: loads and the output store ----------------
            T.set_max_nreg(nreg_io, inc_io)
            cnt[0] = 0
            # Branch on tx ranges (not a computed warp id): TileLang partitions each branch's
            # parallel loops over exactly the threads of that range.
            if tx < IO0 + 32:
                for it in T.serial(n_items):
                    item_at(it, item_ctx, itm)
                    bh = itm[1]
                    bos = itm[2]
                    nloop = itm[4]
                    hk = bh // G
                    for c in T.serial(nloop):
                        u = cnt[0] + c
                        b = u % 2
                        left = bos + c * C
                        T.barrier_wait(free[b], (u // 2 + 1) % 2)
                        # Whole chunks, also a sequence's last one: rows past eos hold the next
                        # sequence's (finite) data or TMA's zero fill; the consumers zero those
                        # columns of Uᵀ.
                        if tma_qk:
                            # in 64-column halves: kq_s is stored as two 128-byte-swizzled panels of
                            # 64 columns, and a box of half its rows across both is not one TMA box
                            for hh in T.unroll(K // 64):
                                T.tma_copy(q[left:left + C, hk, hh * 64:hh * 64 + 64],
                                           kq_s[b, C:2 * C, hh * 64:hh * 64 + 64], barrier=ready[b])
                                T.tma_copy(k[left:left + C, hk, hh * 64:hh * 64 + 64],
                                           kq_s[b, 0:C, hh * 64:hh * 64 + 64], barrier=ready[b])
                        else:
                            for i, j in T.Parallel(C, K):
                                kq_s[b, C + i, j] = q[T.min(left + i, NT - 1), hk, j]
                            for i, j in T.Parallel(C, K):
                                kq_s[b, i, j] = k[T.min(left + i, NT - 1), hk, j]
                            T.fence_proxy_async()
                        T.barrier_arrive(ready[b])
                    cnt[0] = cnt[0] + nloop
            elif tx < IO0 + 64:
                for it in T.serial(n_items):
                    item_at(it, item_ctx, itm)
                    bv = itm[0]
                    bh = itm[1]
                    bos = itm[2]
                    eos = itm[3]
                    nloop = itm[4]
                    v0 = bv * BV
                    for c in T.serial(nloop):
                        u = cnt[0] + c
                        b = u % 2
                        left = bos + c * C
                        T.barrier_wait(free[b], (u // 2 + 1) % 2)
                        for w in T.unroll(NW):
                            if tma_v:
                                T.tma_copy(v[left:left + C, bh, v0 + w * R:v0 + w * R + R], v_s[b, w, :, :],
                                           barrier=ready[b])
                            else:
                                for i, j in T.Parallel(C, R):
                                    v_s[b, w, i, j] = v[T.min(left + i, NT - 1), bh, v0 + w * R + j]
                        if not tma_v:
                            T.fence_proxy_async()
                        # γ: rows past eos repeat the last valid γ, so every exponent stays ≤ 0. The
                        # two exponential vectors the chain scales by are made here, off the chain.
                        for i in T.Parallel(C):
                            g_s[b, i] = gcum[T.min(left + i, eos - 1), bh]
                            eg_s[b, i] = T.exp(gcum[T.min(left + i, eos - 1), bh])
                            egl_s[b, i] = T.exp(gcum[T.min(left + C - 1, eos - 1), bh] - gcum[T.min(left + i, eos - 1), bh])
                        T.barrier_arrive(ready[b])
                    cnt[0] = cnt[0] + nloop
            elif tx < IO0 + 96:
                # Aβ's blocks above the diagonal: never loaded (kkt_solve does not write them; see
                # kkt_solve.ABETA_PANEL), zero in both buffers from the start. In the panel layout
                # they are the first 16J rows of panel J, contiguous.
                for bb, i, j in T.Parallel(2, B, B):
                    a_s[bb, i, B + j] = T.cast(0, HALF)
                for bb, i, j in T.Parallel(2, 2 * B, B):
                    a_s[bb, i, 2 * B + j] = T.cast(0, HALF)
                for bb, i, j in T.Parallel(2, 3 * B, B):
                    a_s[bb, i, 3 * B + j] = T.cast(0, HALF)
                T.fence_proxy_async()       # the consumers' wgmma reads them (after ready[b])
                for it in T.serial(n_items):
                    item_at(it, item_ctx, itm)
                    bh = itm[1]
                    bos = itm[2]
                    nloop = itm[4]
                    if prefetch_state:
                        # this item's start state, once the consumers hold the previous one's
                        T.barrier_wait(xs_free, (it + 1) % 2)
                        for f in T.unroll(9):
                            itm_s[f] = itm[f]
                        if itm[5] == 1:
                            v0 = itm[0] * BV
                            if vk:
                                T.tma_copy(src[itm[6], bh, v0:v0 + BV, 0:K], x_s, barrier=xs_ready)
                            else:
                                T.tma_copy(src[itm[6], bh, 0:K, v0:v0 + BV], x_s, barrier=xs_ready)
                        T.barrier_arrive(xs_ready)
                    for c in T.serial(nloop):
                        u = cnt[0] + c
                        b = u % 2
                        left = bos + c * C
                        T.barrier_wait(free[b], (u // 2 + 1) % 2)
                        # the rows 16J.. of each 16-column panel J (four statements: a TileLang
                        # loop would make the boxes' extents symbolic)
                        T.tma_copy(a[left:left + C, bh, 0:B], a_s[b, 0:C, 0:B], barrier=ready[b])
                        T.tma_copy(a[left + B:left + C, bh, B:2 * B], a_s[b, B:C, B:2 * B], barrier=ready[b])
                        T.tma_copy(a[left + 2 * B:left + C, bh, 2 * B:3 * B], a_s[b, 2 * B:C, 2 * B:3 * B],
                                   barrier=ready[b])
                        T.tma_copy(a[left + 3 * B:left + C, bh, 3 * B:C], a_s[b, 3 * B:C, 3 * B:C], barrier=ready[b])
                        T.barrier_arrive(ready[b])
                    cnt[0] = cnt[0] + nloop
            else:
                if with_output:
                    for it in T.serial(n_items):
                        item_at(it, item_ctx, itm)
                        bv = itm[0]
                        bh = itm[1]
                        bos = itm[2]
                        eos = itm[3]
                        nloop = itm[4]
                        v0 = bv * BV
                        for c in T.serial(nloop):
                            u = cnt[0] + c
                            left = bos + c * C
                            T.barrier_wait(o_ready, u % 2)
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
                        cnt[0] = cnt[0] + nloop

    def live(slot, null_slot):
        return (slot >= 0) & (slot != null_slot)

    @T.macro
    def fixed_item(it, fields, f):
        """One item per CTA (grid (NV, HV, sequences)): its fields, computed at the kernel's top."""
        f[0] = fields[0]
        f[1] = fields[1]
        f[2] = fields[2]
        f[3] = fields[3]
        f[4] = fields[4]
        f[5] = fields[5]
        f[6] = fields[6]
        f[7] = fields[7]
        f[8] = fields[8]

    def start_mode(ok, n, has_initial_state):
        if read_has_initial_state:
            return T.if_then_else(ok & (has_initial_state[n] != 0), 1, 0)
        return T.if_then_else(ok, 1, 0)

    @T.macro
    def persistent_item(it, ctx, f):
        """The it-th item of CTA bx in the persistent walk: items are (sequence rank, head, V block)
        with the ranks in ``seq_order`` (longest first), dealt out in rounds of num_ctas, every
        other round in reverse, so the CTA that took a round's longest item takes the next round's
        shortest. ctx: (bx, num_ctas, seq_order, cu_seqlens, state_indices, has_initial_state,
        null_slot). Every step is its own statement: nested in one expression, the bounds checks
        TileLang adds around each table read copied the index arithmetic into every branch."""
        pos = T.if_then_else(it % 2 == 0, ctx[0], ctx[1] - 1 - ctx[0])
        item = it * ctx[1] + pos
        n = ctx[2][item // (NV * HV)]
        slot = ctx[4][n]
        ok = live(slot, ctx[6])
        bos = ctx[3][n]
        eos = ctx[3][n + 1]
        f[0] = item % NV
        f[1] = item // NV % HV
        f[2] = bos
        f[3] = eos
        f[4] = T.if_then_else(ok, T.ceildiv(eos - bos, C), 0)
        f[5] = start_mode(ok, n, ctx[5])
        f[6] = slot
        f[7] = slot
        f[8] = T.if_then_else(ok, 1, 0)

    if phase == 0 and persistent:
        @T.prim_func
        def qla_fused_fwd_persistent(
            q: T.StridedTensor((NT, H, K), (sq, K, 1), in_dtype),
            k: T.StridedTensor((NT, H, K), (sk, K, 1), in_dtype),
            v: T.StridedTensor((NT, HV, V), (sv, V, 1), in_dtype),
            gcum: T.Tensor((NT, HV), accum),
            a: T.Tensor((NT, HV, C), HALF),
            cu_seqlens: T.Tensor((NS + 1,), "int32"),
            state_indices: T.Tensor((NS,), "int32"),
            has_initial_state: T.Tensor((NS,), "uint8"),
            pool: T.StridedTensor(pool_shape, pool_strides, pool_dtype),
            out: T.StridedTensor((NT, HV, V), (so, V, 1), in_dtype),
            null_slot: T.int32,
            seq_order: T.Tensor((NS,), "int32"),
            num_ctas: T.int32,
        ):
            with T.Kernel(num_ctas, threads=threads) as bx:
                # NS·HV·NV items over num_ctas CTAs: every CTA takes one per whole round, and the
                # last, partial round goes to the CTAs whose position in it is below the remainder.
                n_all = NS * (HV * NV)
                rounds = n_all // num_ctas
                last_pos = T.if_then_else(rounds % 2 == 0, bx, num_ctas - 1 - bx)
                n_mine = rounds + T.if_then_else(last_pos < n_all % num_ctas, 1, 0)
                walk(q, k, v, gcum, a, out, pool, pool, n_mine, persistent_item,
                     (bx, num_ctas, seq_order, cu_seqlens, state_indices, has_initial_state, null_slot), False,
                     prefetch_state=True)
        return qla_fused_fwd_persistent

    if phase == 0:
        @T.prim_func
        def qla_fused_fwd(
            q: T.StridedTensor((NT, H, K), (sq, K, 1), in_dtype),
            k: T.StridedTensor((NT, H, K), (sk, K, 1), in_dtype),
            v: T.StridedTensor((NT, HV, V), (sv, V, 1), in_dtype),
            gcum: T.Tensor((NT, HV), accum),
            a: T.Tensor((NT, HV, C), HALF),
            cu_seqlens: T.Tensor((NS + 1,), "int32"),
            state_indices: T.Tensor((NS,), "int32"),
            has_initial_state: T.Tensor((NS,), "uint8"),
            pool: T.StridedTensor(pool_shape, pool_strides, pool_dtype),
            out: T.StridedTensor((NT, HV, V), (so, V, 1), in_dtype),
            null_slot: T.int32,
        ):
            with T.Kernel(NV, HV, NS, threads=threads) as (bv, bh, bn):
                bos = cu_seqlens[bn]
                eos = cu_seqlens[bn + 1]
                slot = state_indices[bn]
                ok = live(slot, null_slot)
                nloop = T.if_then_else(ok, T.ceildiv(eos - bos, C), 0)
                init_mode = start_mode(ok, bn, has_initial_state)
                walk(q, k, v, gcum, a, out, pool, pool, 1, fixed_item,
                     (bv, bh, bos, eos, nloop, init_mode, slot, slot, T.if_then_else(ok, 1, 0)), False)
        return qla_fused_fwd

    if phase == 1 and tail_start:
        NSP = T.dynamic("num_partials")

        @T.prim_func
        def qla_fused_fwd_partials_tail(
            q: T.StridedTensor((NT, H, K), (sq, K, 1), in_dtype),
            k: T.StridedTensor((NT, H, K), (sk, K, 1), in_dtype),
            v: T.StridedTensor((NT, HV, V), (sv, V, 1), in_dtype),
            gcum: T.Tensor((NT, HV), accum),
            a: T.Tensor((NT, HV, C), HALF),
            part_bounds: T.Tensor((NSP, 2), "int32"),
            scratch: T.Tensor((2 * NSP, HV) + state_shape, accum),
            tail: T.Tensor((NSP, HV), "int32"),
        ):
            with T.Kernel(NV, HV, 2 * NSP, threads=threads) as (bv, bh, bz):
                r = bz % NSP
                bos = part_bounds[r, 0]
                eos = part_bounds[r, 1]
                transition = bz >= NSP
                nch = T.ceildiv(eos - bos, C)
                w = T.min(tail[r, bh], nch)
                # w > 0: the last w chunks decay the state by at least e^-T, so h is their walk from
                # S = 0 and M is negligible (stored as 0: no walk, zero start); w = 0: the exact walk.
                walk(q, k, v, gcum, a, None, scratch, scratch, 1, fixed_item,
                     (bv, bh, T.if_then_else((w > 0) & (bz < NSP), bos + (nch - w) * C, bos), eos,
                      T.if_then_else(w > 0, T.if_then_else(transition, 0, w), nch),
                      T.if_then_else(transition & (w == 0), 2, 0), bz, bz, 1),
                     transition)
        return qla_fused_fwd_partials_tail

    if phase == 1:
        NSP = T.dynamic("num_partials")

        @T.prim_func
        def qla_fused_fwd_partials(
            q: T.StridedTensor((NT, H, K), (sq, K, 1), in_dtype),
            k: T.StridedTensor((NT, H, K), (sk, K, 1), in_dtype),
            v: T.StridedTensor((NT, HV, V), (sv, V, 1), in_dtype),
            gcum: T.Tensor((NT, HV), accum),
            a: T.Tensor((NT, HV, C), HALF),
            part_bounds: T.Tensor((NSP, 2), "int32"),
            scratch: T.Tensor((2 * NSP, HV) + state_shape, accum),
        ):
            with T.Kernel(NV, HV, 2 * NSP, threads=threads) as (bv, bh, bz):
                r = bz % NSP
                bos = part_bounds[r, 0]
                eos = part_bounds[r, 1]
                transition = bz >= NSP
                walk(q, k, v, gcum, a, None, scratch, scratch, 1, fixed_item,
                     (bv, bh, bos, eos, T.ceildiv(eos - bos, C), T.if_then_else(transition, 2, 0), bz, bz, 1),
                     transition)
        return qla_fused_fwd_partials

    NSV = T.dynamic("num_virtual_seqs")
    NB = T.dynamic("num_cp_rows")
    NTR = T.dynamic("num_tail_rows")
    NTW = T.dynamic("tail_width")

    @T.prim_func
    def qla_fused_fwd_from_starts(
        q: T.StridedTensor((NT, H, K), (sq, K, 1), in_dtype),
        k: T.StridedTensor((NT, H, K), (sk, K, 1), in_dtype),
        v: T.StridedTensor((NT, HV, V), (sv, V, 1), in_dtype),
        gcum: T.Tensor((NT, HV), accum),
        a: T.Tensor((NT, HV, C), HALF),
        cu_seqlens_v: T.Tensor((NSV + 1,), "int32"),
        seq_of_v: T.Tensor((NSV,), "int32"),
        prev_row_v: T.Tensor((NSV,), "int32"),
        tail: T.Tensor((NTR, NTW), "int32"),
        state_indices: T.Tensor((NS,), "int32"),
        last_v: T.Tensor((NSV,), "uint8"),
        cp_buf: T.Tensor((NB, HV) + state_shape, accum),
        start_base: T.int32,
        pool: T.StridedTensor(pool_shape, pool_strides, pool_dtype),
        out: T.StridedTensor((NT, HV, V), (so, V, 1), in_dtype),
        null_slot: T.int32,
    ):
        with T.Kernel(NV, HV, NSV, threads=threads) as (bv, bh, bn):
            bos = cu_seqlens_v[bn]
            eos = cu_seqlens_v[bn + 1]
            seq = seq_of_v[bn]
            slot = state_indices[seq]
            ok = live(slot, null_slot)
            # The start: where the previous partition was a tail start (w > 0), its h as phase 1
            # stored it (the combine's S ← h_p, the same numbers, without the copy); else the row
            # the combine wrote. prev_row_v is -1 on a sequence's first partition and everywhere
            # in exact CP (then tail is any 1×1 tensor, never read).
            prev = prev_row_v[bn]
            # (indices clamped into range: both branches of a select may be evaluated)
            took = T.if_then_else(prev >= 0, tail[T.max(prev, 0), T.min(bh, NTW - 1)], 0)
            src_row = T.if_then_else(took > 0, prev, start_base + bn)
            walk(q, k, v, gcum, a, out, cp_buf, pool, 1, fixed_item,
                 (bv, bh, bos, eos, T.if_then_else(ok, T.ceildiv(eos - bos, C), 0), T.if_then_else(ok, 1, 0),
                  src_row, slot, T.if_then_else(ok & (last_v[bn] != 0), 1, 0)), False)
    return qla_fused_fwd_from_starts
