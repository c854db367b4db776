"""Build the TileLang kernels that tests/test_hopper_gpu.py and bench_serving/kernel_bench.py will use
into TileLang's disk cache, in parallel worker processes (one nvcc per core), so that the tests and
the bench load instead of compiling one kernel at a time (~10 s each; ~150 kernels in all).

    python bench_serving/gpu_prebuild.py [--processes 16] [--heads 16/32,2/8] [--no-tests | --test-configs 0,3]

Run it first on the lent GPU machine (16 cores: ~2 min), or on any machine with nvcc into a
``TILELANG_CACHE_DIR`` that then travels. Variants are derived from the tests' and the bench's
tensor shapes and strides on the meta device (``hopper.variant_for``), every V-block width the walk
builds (``hopper.KERNEL_BLOCK_V``), so whatever the plan picks is there; each variant brings its CP
kernels. ``walk_takes`` drops widths an A/B alternative's fused_fwd.py refuses.
"""
import argparse
import multiprocessing as mp
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import torch

os.environ.setdefault("TILELANG_DEFAULT_TARGET", "nvidia/nvidia-h100")
from qla_serve.kernels import hopper  # noqa: E402

K = V = 128
BENCH_HEADS = "16/32,2/8,16/64,8/32,4/16,16/48"
# (H, HV, pool dtype, layout, l2norm in kernel, has_initial_state given, packed qkv, extra width)
TEST_CONFIGS = [
    (1, 1, torch.float32, "vk", False, True, True, 7),
    (2, 4, torch.bfloat16, "kv", False, True, False, 0),
    (2, 8, torch.float32, "kv", True, True, True, 0),
    (1, 8, torch.bfloat16, "vk", False, False, False, 0),
    (1, 2, torch.float32, "vk", False, True, True, 0),
    (1, 2, torch.float32, "vk", False, True, False, 0),
    (2, 4, torch.float32, "vk", False, True, False, 0),
    (2, 8, torch.bfloat16, "kv", False, True, False, 0),
    (1, 4, torch.float32, "kv", True, True, False, 0),
    (2, 4, torch.bfloat16, "vk", False, False, False, 0),
    (2, 8, torch.bfloat16, "kv", True, True, True, 0),
    (2, 4, torch.bfloat16, "vk", True, True, True, 7),
    (2, 4, torch.float32, "vk", True, True, True, 0),
    (2, 4, torch.float32, "vk", True, True, False, 0),     # a 1-token batch: compact copies
    (1, 2, torch.float32, "kv", False, True, True, 0),     # cp-1/2-fp32-kv-P14 (compiled in the tests until session 34)
    (2, 8, torch.float32, "vk", False, True, False, 0),    # gva4-…-300-seqs, corr-gva4 (also the bench's 2/8)
    (1, 4, torch.float32, "kv", True, True, True, 0),      # cp-1/4-fp32-kv-l2-null-P4 (these two compiled
    (2, 8, torch.bfloat16, "vk", False, True, False, 0),   # cp-2/8-bf16-vk-P7          in the tests until session 36)
    # gva2-bf16-vk-misaligned-pool-5ctas, a walk-forms case (compiled in the tests until session 49)
    (2, 4, torch.bfloat16, "vk", False, True, False, 0),
    (2, 6, torch.float32, "kv", False, True, False, 0),    # gva3-fp32-kv-g3 (session 59)
]

# The GPU tests' own kernel forms beyond the variants' (tests/test_gpu_prebuild.py checks these lists
# against the test file): cp.combine_kernel of test_cp_combine_kernel's cases (HV, V-block, pool dtype,
# layout, has_initial_state given), each in both forms; gating_kernel of the strided gating case
# (a and b as column views of one [T, 2·HV] buffer).
COMBINE_TEST_FORMS = [
    (4, 128, "float32", "vk", True),
    (8, 64, "bfloat16", "kv", False),
    (2, 64, "bfloat16", "vk", True),
    (2, 128, "float32", "kv", True),
]
GATING_TEST_FORMS = [(32, "bfloat16", "float32", "bfloat16", (64, 64), 20.0)]


# hopper.conv_kernel arguments of tests/test_conv.py's GPU cases (H, HV, W, dtype, state dtype, layout,
# bias, l2norm, has_initial_state, x token stride)
CONV_TEST_FORMS = [
    (1, 2, 4, "bfloat16", "bfloat16", "sd", False, True, True, 512),
    (1, 2, 4, "bfloat16", "float32", "ds", True, True, True, 512),
    (2, 4, 4, "bfloat16", "bfloat16", "sd", False, True, True, 1024 + 264),
    (16, 32, 4, "bfloat16", "bfloat16", "sd", False, True, True, 8192),
    (2, 16, 4, "bfloat16", "float32", "sd", False, True, True, 2560),
    (2, 4, 4, "bfloat16", "bfloat16", "sd", False, True, True, 1024),
]


def build_conv(args) -> None:
    """Process-pool entry: one gdn_conv kernel."""
    hopper.conv_kernel(*args)


def build_combine(args) -> None:
    """Process-pool entry: one CP combine of the tests (exact and tail-start forms)."""
    from qla_serve.kernels.hopper import cp
    HV, block_v, pool_dtype, layout, hinit = args
    for tail in (False, True):
        cp.combine_kernel(HV, K, V, block_v, pool_dtype, layout, hinit, read_tail=tail)


def build_gating(args) -> None:
    """Process-pool entry: one gating kernel (``gdn_gating``, and ``gates=`` calls without l2norm)."""
    hopper.gating_kernel(*args)


def build_gated_norm(args) -> None:
    """Process-pool entry: one l2norm pass that also computes the gates (``gdn_prefill(gates=...)``)."""
    hopper.qk_norm_kernel(*args)


def build_in_kernel_l2norm(var) -> None:
    """Process-pool entry: a variant's kernels with l2norm inside them (QLA_L2NORM=kernel, the tests' A/B)."""
    os.environ[hopper.L2NORM_ENV] = "kernel"
    hopper.build_variant(var)


def variant(H, HV, pool_dtype, layout, l2, hinit, packed, extra, block_v):
    T = 64
    meta = dict(device="meta", dtype=torch.bfloat16)
    if packed:
        mixed = torch.empty(T, 2 * H * K + HV * V + extra, **meta)
        q = mixed[:, :H * K].view(T, H, K)
        k = mixed[:, H * K:2 * H * K].view(T, H, K)
        v = mixed[:, 2 * H * K:2 * H * K + HV * V].view(T, HV, V)
    else:
        q, k, v = torch.empty(T, H, K, **meta), torch.empty(T, H, K, **meta), torch.empty(T, HV, V, **meta)
    g = torch.empty(T, HV, device="meta")
    pool = torch.empty(2, HV, V, K, device="meta", dtype=pool_dtype)
    return hopper.variant_for(q, k, v, g, g, torch.empty(T, HV, V, **meta), pool, layout, l2, hinit, block_v,
                              K ** -0.5)


def walk_takes(block_v: int) -> bool:
    """Whether this checkout's fused_fwd.py builds the V-block (the RS walk raises ValueError at 32)."""
    from qla_serve.kernels.hopper import fused_fwd
    try:
        fused_fwd.build_fused_fwd(1, 1, 128, 128, block_v, "bfloat16", "float32", "vk", False, True, 1.0,
                                  (128, 128, 128, 128))
    except ValueError:
        return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--processes", type=int, default=os.cpu_count())
    ap.add_argument("--heads", default=BENCH_HEADS, help="bench head configs H/HV (comma-separated)")
    ap.add_argument("--no-tests", action="store_true")
    ap.add_argument("--test-configs", default="",
                    help="only these TEST_CONFIGS entries (comma-separated indices), and none of the tests' "
                         "other kernel forms: what a subset of the GPU tests needs (an experiment's quick tests)")
    ap.add_argument("--host-profile", action="store_true",
                    help="also host_profile.py's variants (bf16 pool) for the --heads configs")
    ap.add_argument("--packed-l2norm", action="store_true",
                    help="bench variants with q/k/v packed in one buffer and in-kernel l2norm "
                         "(kernel_bench.py with QLA_BENCH_INPUTS=packed-l2norm)")
    ap.add_argument("--block-v", default=",".join(str(b) for b in hopper.KERNEL_BLOCK_V),
                    help="V-block widths to build for every variant")
    args = ap.parse_args()
    widths = [int(x) for x in args.block_v.split(",")]
    dropped = [bv for bv in widths if not walk_takes(bv)]
    if dropped:
        print(f"V-blocks {dropped}: this fused_fwd.py does not build them; skipped", flush=True)
        widths = [bv for bv in widths if bv not in dropped]
    vs = []
    for hv in args.heads.split(","):
        H, HV = (int(x) for x in hv.split("/"))
        vs += [variant(H, HV, torch.float32, "vk", False, True, False, 0, bv) for bv in widths]
        if args.packed_l2norm:
            vs += [variant(H, HV, torch.float32, "vk", True, True, True, 0, bv) for bv in widths]
        if args.host_profile:
            vs += [variant(H, HV, torch.bfloat16, "vk", False, True, False, 0, bv) for bv in widths]
    in_kernel = []
    all_tests = not args.no_tests and not args.test_configs
    if args.test_configs and not args.no_tests:
        vs += [variant(*TEST_CONFIGS[int(i)], bv) for i in args.test_configs.split(",") for bv in widths]
        in_kernel = list(dict.fromkeys(v for v in vs if v.use_qk_l2norm and v.num_k_heads == 2))
    if all_tests:
        vs += [variant(*cfg, bv) for cfg in TEST_CONFIGS for bv in widths]
        vs += hopper.variants_for_heads(2, 4, pool_dtypes=("float32",), use_qk_l2norm=(False,),
                                        has_initial_state=(True,))   # also the form after gdn_conv (packed)
        vs += hopper.variants_for_heads(2, 4, pool_dtypes=("float32",), use_qk_l2norm=(True,),
                                        has_initial_state=(False,), packed_qkv=(True,))
        in_kernel = list(dict.fromkeys(v for v in vs if v.use_qk_l2norm and v.num_k_heads == 2))
    vs = list(dict.fromkeys(form for v in vs for form in v.call_forms()))   # + each one's 1-token form
    print(f"{len(vs)} variants → {os.environ.get('TILELANG_CACHE_DIR', '~/.tilelang/cache')}", flush=True)
    t0 = time.time()
    with ProcessPoolExecutor(max_workers=args.processes, mp_context=mp.get_context("spawn")) as ex:
        list(ex.map(hopper.build_variant, vs))      # disk cache only: nothing loaded here
        list(ex.map(build_in_kernel_l2norm, in_kernel))
        if all_tests:
            list(ex.map(build_conv, CONV_TEST_FORMS))
            list(ex.map(build_gated_norm, hopper.qk_norm_gating_variants(vs)))
            list(ex.map(build_gating, [a for hv in (4, 8, 32) for a in hopper.gating_variants(hv)]
                        + GATING_TEST_FORMS))
            list(ex.map(build_combine, COMBINE_TEST_FORMS))
    print(f"built in {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
