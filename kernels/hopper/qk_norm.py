"""Stage 0 of the Hopper GDN prefill, only for calls that ask the op to l2-normalise q and k:
``x / sqrt(Σx² + 1e-6)`` per token and key head (FLA's convention, as ``qla_serve.reference``),
written to compact ``[T, H, K]`` buffers that kkt_solve and the walk then read as plain inputs.
When the call hands the op raw gate inputs (``gdn_prefill(gates=...)``), the same launch computes
g and beta (``gating.gates_macro``, on the z = 0, head 0 CTAs): one launch less per call.

Why a pass of its own: the walk runs one CTA per (value head, V block), so normalising inside it
(its WG_P, on each chunk's critical path) repeats the work HV/H · V/BV times per key head and made
calls 1.20–1.44× slower (session 13, packed inputs). Here each (token block, key head) is read
once and written once: ~4·T·H·K bytes of traffic, a memory-bound pass.

Grid: (token blocks of ROWS, H, 2), 128 threads; z = 0 does q, 1 does k. The input's token stride
is compile-time (an engine's views of its packed qkv buffer have one fixed stride per model) so
that loads vectorise; T is dynamic.
"""

import tilelang.language as T

from .gating import gates_macro

ROWS = 32           # tokens per CTA: 32×128 fp32 = 32 values a thread for the row and its squares
EPS = 1e-6
PASS_CONFIGS: dict = {}


def build_qk_l2norm(H: int, K: int, in_dtype: str, strides: tuple[int, int], gating: tuple | None = None):
    """TileLang prim_func for one (H, K, dtype, q/k token strides) variant. ``gating``: None, or
    ``(HV, ab_dtype, a_log_dtype, dt_bias_dtype, (a, b token strides), softplus threshold)`` for the
    form that also writes g and beta."""
    R = ROWS
    NT = T.dynamic("num_tokens")
    sq, sk = (int(x) for x in strides)
    accum = "float32"

    @T.macro
    def normalise(x, y, t0, bh):
        xf = T.alloc_fragment((R, K), accum)
        sq_f = T.alloc_fragment((R, K), accum)
        rn = T.alloc_fragment((R,), accum)
        for i, j in T.Parallel(R, K):
            xf[i, j] = T.if_then_else(t0 + i < NT, T.cast(x[t0 + i, bh, j], accum), 0.0)
        for i, j in T.Parallel(R, K):
            sq_f[i, j] = xf[i, j] * xf[i, j]
        T.reduce_sum(sq_f, rn, dim=1)
        for i, j in T.Parallel(R, K):
            if t0 + i < NT:
                y[t0 + i, bh, j] = T.cast(xf[i, j] * T.rsqrt(rn[i] + EPS), in_dtype)

    if gating is None:
        @T.prim_func
        def qla_qk_l2norm(
            q: T.StridedTensor((NT, H, K), (sq, K, 1), in_dtype),
            k: T.StridedTensor((NT, H, K), (sk, K, 1), in_dtype),
            q_out: T.Tensor((NT, H, K), in_dtype),
            k_out: T.Tensor((NT, H, K), in_dtype),
        ):
            with T.Kernel(T.ceildiv(NT, R), H, 2, threads=128) as (bt, bh, which):
                if which == 0:
                    normalise(q, q_out, bt * R, bh)
                else:
                    normalise(k, k_out, bt * R, bh)

        return qla_qk_l2norm

    HV, ab_dtype, a_log_dtype, dt_bias_dtype, (sa, sb), threshold = gating
    gates = gates_macro(int(HV), R, float(threshold), NT)

    @T.prim_func
    def qla_qk_l2norm_gating(
        q: T.StridedTensor((NT, H, K), (sq, K, 1), in_dtype),
        k: T.StridedTensor((NT, H, K), (sk, K, 1), in_dtype),
        q_out: T.Tensor((NT, H, K), in_dtype),
        k_out: T.Tensor((NT, H, K), in_dtype),
        a: T.StridedTensor((NT, HV), (sa, 1), ab_dtype),
        b: T.StridedTensor((NT, HV), (sb, 1), ab_dtype),
        A_log: T.Tensor((HV,), a_log_dtype),
        dt_bias: T.Tensor((HV,), dt_bias_dtype),
        g: T.Tensor((NT, HV), "float32"),
        beta: T.Tensor((NT, HV), "float32"),
    ):
        with T.Kernel(T.ceildiv(NT, R), H, 2, threads=128) as (bt, bh, which):
            if which == 0:
                normalise(q, q_out, bt * R, bh)
                if bh == 0:
                    gates(a, b, A_log, dt_bias, g, beta, bt * R)
            else:
                normalise(k, k_out, bt * R, bh)

    return qla_qk_l2norm_gating
