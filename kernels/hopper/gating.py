"""GDN gating for engines that hand the op their raw gate inputs (vLLM's adapter):

    g    = −exp(A_log) · softplus(a + dt_bias)     (softplus(x) = x above ``threshold``)
    beta = sigmoid(b)

both fp32 ``[T, HV]``, the formula of vLLM's ``fused_post_conv_prep`` and FLA's gating. It exists
so that an adapter can take q/k/v as views of its conv output (the op l2-normalises q and k in its
own pass) instead of paying a prep kernel that copies all of q, k and v.

Two homes use :func:`gates_macro`: the stand-alone kernel here (``qla_serve.gdn_gating``) and the
l2norm pass (``qk_norm.py``), which computes the gates in the same launch when ``gdn_prefill`` is
handed the raw inputs (one launch and one op call less per layer: host time is what a serving
step's first GDN layer waits on).

Grid: token blocks of ROWS, 128 threads; every (token, head) is one element. Input dtypes and a/b
token strides are compile-time, T is dynamic. Exact ``exp``/``log`` (no fast math): g feeds
exponentials over whole chunks.
"""

import tilelang.language as T

ROWS = 32
PASS_CONFIGS: dict = {}


def gates_macro(HV: int, rows: int, threshold: float, num_tokens):
    """A macro writing g and beta for tokens [t0, t0 + rows) of all HV heads."""
    f32 = "float32"
    thr = float(threshold)

    @T.macro
    def gates(a, b, A_log, dt_bias, g, beta, t0):
        for i, h in T.Parallel(rows, HV):
            if t0 + i < num_tokens:
                x = T.cast(a[t0 + i, h], f32) + T.cast(dt_bias[h], f32)
                # softplus, stable form: max(x, 0) + log(1 + e^-|x|)
                sp = T.if_then_else(x > thr, x, T.max(x, 0.0) + T.log(1.0 + T.exp(-T.abs(x))))
                g[t0 + i, h] = -T.exp(T.cast(A_log[h], f32)) * sp
                beta[t0 + i, h] = 1.0 / (1.0 + T.exp(-T.cast(b[t0 + i, h], f32)))

    return gates


def build_gating(HV: int, ab_dtype: str, a_log_dtype: str, dt_bias_dtype: str, strides: tuple[int, int],
                 threshold: float):
    R = ROWS
    NT = T.dynamic("num_tokens")
    sa, sb = (int(x) for x in strides)
    f32 = "float32"
    gates = gates_macro(HV, R, threshold, NT)

    @T.prim_func
    def qla_gdn_gating(
        a: T.StridedTensor((NT, HV), (sa, 1), ab_dtype),
        b: T.StridedTensor((NT, HV), (sb, 1), ab_dtype),
        A_log: T.Tensor((HV,), a_log_dtype),
        dt_bias: T.Tensor((HV,), dt_bias_dtype),
        g: T.Tensor((NT, HV), f32),
        beta: T.Tensor((NT, HV), f32),
    ):
        with T.Kernel(T.ceildiv(NT, R), threads=128) as bt:
            gates(a, b, A_log, dt_bias, g, beta, bt * R)

    return qla_gdn_gating
