"""X = (I + L)⁻¹ of one chunk's 64×64 strictly lower-triangular L, by one warpgroup, warp-synchronously.

kkt_solve's inverse (see its module doc) as hand-written CUDA that TileLang includes
(``T.import_source(SOURCE)``) and calls on shared-memory tiles (``T.call_extern``). The blocks,
their order and every rounding are kkt_solve's:

1. Diagonal 16×16 blocks X_II = (I + L_II)⁻¹ in fp32: warp I, lane c (< 16) owns column c of block I
   and forward-substitutes it, x_r = δ_rc − Σ_{m<r} L_rm x_m with m ascending (one fused
   multiply-add per term, the order of kkt_solve's loop).
2. 16 → 32: X_10 = −X_11 (L_10 X_00), X_32 = −X_33 (L_32 X_22).
3. 32 → 64: X[32:64, 0:32] = −X_B (L_C X_A), X_A = X[0:32, 0:32], X_B = X[32:64, 32:64],
   L_C = L[32:64, 0:32].
The merge products take fp16 operands (round to nearest from the fp32 tile) and accumulate in fp32;
the inner product of each is rounded to fp16 once. Results are stored in fp32, as kkt_solve keeps
them before its output rounding.

Why: kkt_solve scatters L and the merge operands into ten shared tiles in two-byte stores and runs
the merges as TileLang gemms, with a CTA-wide barrier after every stage (~12 a value head: session
44's ncu page had the four merge stages at 36 % of the kernel's stall samples). Here the operands are
read from one fp32 tile straight into mma fragments, each warp's work stays inside the warp
between three warpgroup barriers, and the products are ``mma.sync.m16n8k16`` on registers. The same
function serves the walk that makes Aβ itself (FlashInfer's design; ``fused_fwd``'s
``fused_abeta``, session 47's ``exp/fused-abeta`` rebuilt on it), where one warpgroup's latency
per chunk is the whole question. Both uses are A/B candidates, not yet run on a GPU.

Layout: one row-major fp32 tile ``tile`` [64][ld] holds both. On entry L sits transposed above the
diagonal (L(i, j), i > j, at [j][i]); on exit X sits on and below it, in every block on and below
the block diagonal (the diagonal blocks whole, zeros above their diagonal). Below the diagonal
nothing needs to be set on entry, and above the diagonal blocks nothing is written. One 17-KB tile
instead of two keeps kkt_solve at four CTAs per SM. X's blocks (0, 1) and (2, 3), which X_A and
X_B have as zero corners, hold L_10ᵀ and L_32ᵀ: the two products that would read them add zeros
and are skipped. Every thread of the warpgroup calls the function. It synchronises them three
times on the named barrier ``bar`` (128 threads: the warpgroup's own in a warp-specialised kernel);
the last makes X visible to all of them.

Products are written transposed where that keeps the inner product in registers: with pᵀ = X_00ᵀ
L_10ᵀ (an mma accumulator) the second product X_10ᵀ = pᵀ X_11ᵀ takes pᵀ as its A operand straight
from the accumulator's registers, instead of a round trip through shared memory to make p a B
operand. pᵀ holds the same inner products as p (same terms, same k order), so the numbers are
kkt_solve's.

Fragment layouts (PTX ISA, ``mma.m16n8k16`` with .f16 inputs, .f32 accumulators), g = lane / 4,
t = 2 (lane % 4):
    A (16×16, row): a0 = (g, t..t+1), a1 = (g+8, t..t+1), a2 = (g, t+8..t+9), a3 = (g+8, t+8..t+9)
    B (16×8, col):  b0 = (k = t..t+1, n = g), b1 = (k = t+8..t+9, n = g)
    C (16×8):       c0 = (g, t), c1 = (g, t+1), c2 = (g+8, t), c3 = (g+8, t+1)
(the lower column / k index in the lower half of each f16x2). tests/test_tri_inverse.py compiles
ALGORITHM (the function as the GPU runs it) for the CPU, with the primitives emulated there (128
threads, barriers, the mma from those layouts), and checks it against kkt_solve's scheme.
"""

# The device primitives: thread index, warp sync, fused multiply-add, fp16 packing, the mma, the
# warpgroup barrier. tests/test_tri_inverse.py compiles ALGORITHM on the CPU with its own versions of
# these (128 threads, barriers, the mma's fragment layouts from the PTX ISA).
PRIMITIVES = r"""
#include <cuda_fp16.h>

#define QLA_INV_FN __device__ __forceinline__

QLA_INV_FN int qla_inv_tid() { return threadIdx.x % 128; }
QLA_INV_FN void qla_inv_syncwarp() { __syncwarp(); }
QLA_INV_FN float qla_inv_fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }

// Two fp32 values rounded to an f16x2 register (lo in the low half).
QLA_INV_FN unsigned qla_inv_h2(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&h);
}

// d (16x8 fp32) += a (16x16 fp16) b (16x8 fp16)
QLA_INV_FN void qla_inv_mma(float* d, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// The warpgroup's barrier: named barrier `bar` for its 128 threads (a shared-memory fence among them).
QLA_INV_FN void qla_inv_bar(int bar) {
  asm volatile("bar.sync %0, 128;\n" :: "r"(bar) : "memory");
}
"""

# The inverse itself: plain C++ over the primitives above.
ALGORITHM = r"""
// The A fragment of M(i, k) = p[i * rs + k * cs], i, k < 16.
QLA_INV_FN void qla_inv_frag_a(unsigned* a, const float* p, int rs, int cs, int g, int t) {
  a[0] = qla_inv_h2(p[g * rs + t * cs], p[g * rs + (t + 1) * cs]);
  a[1] = qla_inv_h2(p[(g + 8) * rs + t * cs], p[(g + 8) * rs + (t + 1) * cs]);
  a[2] = qla_inv_h2(p[g * rs + (t + 8) * cs], p[g * rs + (t + 9) * cs]);
  a[3] = qla_inv_h2(p[(g + 8) * rs + (t + 8) * cs], p[(g + 8) * rs + (t + 9) * cs]);
}

// The B fragment of M(k, n) = p[k * rs + n * cs], k < 16, n < 8.
QLA_INV_FN void qla_inv_frag_b(unsigned* b, const float* p, int rs, int cs, int g, int t) {
  b[0] = qla_inv_h2(p[t * rs + g * cs], p[(t + 1) * rs + g * cs]);
  b[1] = qla_inv_h2(p[(t + 8) * rs + g * cs], p[(t + 9) * rs + g * cs]);
}

// Two 16x8 accumulators (columns 0-7, 8-15 of a 16x16 product) as the A fragment of the next product,
// rounded to fp16: the accumulator's (row, column) pairs are the A operand's (row, k) pairs.
QLA_INV_FN void qla_inv_acc_to_a(unsigned* a, const float* d0, const float* d1) {
  a[0] = qla_inv_h2(d0[0], d0[1]);
  a[1] = qla_inv_h2(d0[2], d0[3]);
  a[2] = qla_inv_h2(d1[0], d1[1]);
  a[3] = qla_inv_h2(d1[2], d1[3]);
}

// X[n0 + n][i0 + i] = -acc(i, n) for one 16x8 accumulator of a transposed product.
QLA_INV_FN void qla_inv_store_neg_t(float* X, int ldx, int i0, int n0, const float* d, int g, int t) {
  X[(n0 + t) * ldx + i0 + g] = -d[0];
  X[(n0 + t + 1) * ldx + i0 + g] = -d[1];
  X[(n0 + t) * ldx + i0 + g + 8] = -d[2];
  X[(n0 + t + 1) * ldx + i0 + g + 8] = -d[3];
}

QLA_INV_FN void qla_tri_inverse64(void* tile, int ld, int bar) {
  float* T = static_cast<float*>(tile);
  const int tid = qla_inv_tid();
  const int warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = 2 * (lane % 4);

  // 1. Diagonal block `warp`: lane c < 16 forward-substitutes column c (right-looking: after x_m is
  //    final it is folded into every later row, so each row's terms still arrive with m ascending;
  //    L(r, m) is read from its transposed place, T[m][r]). The block's upper triangle, which held
  //    Lᵀ, is overwritten with X's zeros only after every lane of the warp has read it.
  {
    const int b = 16 * warp;
    float* Tb = T + b * ld + b;
    float x[16];
#pragma unroll
    for (int r = 0; r < 16; ++r) x[r] = (r == lane) ? 1.0f : 0.0f;
    if (lane < 16) {
#pragma unroll
      for (int m = 0; m < 15; ++m) {
#pragma unroll
        for (int r = m + 1; r < 16; ++r) x[r] = qla_inv_fma(-Tb[m * ld + r], x[m], x[r]);
      }
    }
    qla_inv_syncwarp();
    if (lane < 16) {
#pragma unroll
      for (int r = 0; r < 16; ++r) Tb[r * ld + lane] = x[r];
    }
  }
  qla_inv_bar(bar);

  // 2. 16 -> 32: warps 0, 1 make X_10 (a0 = 0), warps 2, 3 X_32 (a0 = 32); warp parity h takes rows
  //    8h.. of it. pT = X_aaᵀ L_baᵀ (both warps of a pair: it is the next product's whole A operand),
  //    then X_baᵀ[:, 8h..] = pT X_bbᵀ[:, 8h..].
  {
    const int a0 = 32 * (warp / 2), b0 = a0 + 16, h = warp % 2;
    unsigned fa[4], fb[2], fp[4];
    float p0[4] = {0.f, 0.f, 0.f, 0.f}, p1[4] = {0.f, 0.f, 0.f, 0.f}, q[4] = {0.f, 0.f, 0.f, 0.f};
    qla_inv_frag_a(fa, T + a0 * ld + a0, 1, ld, g, t);           // X_aaᵀ(i, k) = X[a0+k][a0+i]
    qla_inv_frag_b(fb, T + a0 * ld + b0, ld, 1, g, t);           // L_baᵀ(k, n) = L[b0+n][a0+k] = T[a0+k][b0+n]
    qla_inv_mma(p0, fa, fb);
    qla_inv_frag_b(fb, T + a0 * ld + b0 + 8, ld, 1, g, t);
    qla_inv_mma(p1, fa, fb);
    qla_inv_acc_to_a(fp, p0, p1);
    qla_inv_frag_b(fb, T + (b0 + 8 * h) * ld + b0, 1, ld, g, t); // X_bbᵀ(k, 8h+n) = X[b0+8h+n][b0+k]
    qla_inv_mma(q, fp, fb);
    qla_inv_store_neg_t(T, ld, a0, b0 + 8 * h, q, g, t);        // X[b0+8h+n][a0+i] = -q(i, n)
  }
  qla_inv_bar(bar);

  // 3. 32 -> 64: warp (v, u) = (warp / 2, warp % 2) makes X[32+16v .. +16, 16u .. +16]:
  //    p2T rows 16u.. = X_Aᵀ[16u.., :] L_Cᵀ (16x32, k over X_A's 32 rows), then
  //    resultᵀ[16u.., 16v..] = p2T_band X_Bᵀ[:, 16v..] (k over X_B's 32 columns).
  //    X_A's block (0, 1) and X_B's block (0, 1) (X's blocks (0, 1) and (2, 3)) are zero and hold
  //    L_10ᵀ and L_32ᵀ here: the products that would read them are skipped (they add zeros).
  {
    const int u = warp % 2, v = warp / 2;
    unsigned fa[4], fb[2], fp[2][4];
    float d[4][4];
#pragma unroll
    for (int j = 0; j < 4; ++j) d[j][0] = d[j][1] = d[j][2] = d[j][3] = 0.f;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      if (s == 0 && u == 1) continue;                            // X_A(k < 16, 16 + i): block (0, 1)
      qla_inv_frag_a(fa, T + 16 * s * ld + 16 * u, 1, ld, g, t); // X_Aᵀ(16u+i, 16s+k) = X[16s+k][16u+i]
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        qla_inv_frag_b(fb, T + 16 * s * ld + 32 + 8 * j, ld, 1, g, t);  // L_Cᵀ(16s+k, 8j+n) = T[16s+k][32+8j+n]
        qla_inv_mma(d[j], fa, fb);
      }
    }
    qla_inv_acc_to_a(fp[0], d[0], d[1]);
    qla_inv_acc_to_a(fp[1], d[2], d[3]);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float r[4] = {0.f, 0.f, 0.f, 0.f};
      const int n0 = 32 + 16 * v + 8 * j;                        // X row of this accumulator's n = 0
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        if (s == 1 && v == 0) continue;                          // X_B(n < 16, 16 + k): block (2, 3)
        qla_inv_frag_b(fb, T + n0 * ld + 32 + 16 * s, 1, ld, g, t);  // X_Bᵀ(16s+k, n) = X[n0+n][32+16s+k]
        qla_inv_mma(r, fp[s], fb);
      }
      qla_inv_store_neg_t(T, ld, 16 * u, n0, r, g, t);           // X[n0+n][16u+i] = -r(i, n)
    }
  }
  qla_inv_bar(bar);
}
"""

SOURCE = PRIMITIVES + ALGORITHM
