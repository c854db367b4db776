"""The Hopper TileLang kernels compile for sm_90a on a machine without a GPU.

TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 (set here when unset) makes TileLang build for sm_90a with
nvcc alone. A compile takes ~7 s (kkt_solve) and ~12–20 s (fused_fwd) on 2 cores. By default this
covers a representative subset of one model's warm-up list (both kernels, l2norm on/off, fp32 and bf16
pools, both state layouts, both V-block widths, with and without has_initial_state, contiguous and
packed q/k/v). QLA_COMPILE_ALL=1 (set by tests/run.sh, so CI does it) compiles the whole list that
`qla-serve warmup --heads 16/32` builds, in one worker process per core.
Where tilelang or nvcc is missing this module skips — except under CI=1 or QLA_COMPILE_ALL=1,
where a missing compiler is a failure, not a skip.
"""
import os
import shutil

import pytest

REQUIRED = bool(os.environ.get("CI") or os.environ.get("QLA_COMPILE_ALL"))
try:
    import tilelang  # noqa: F401
except ImportError:
    if REQUIRED:
        raise
    pytest.skip("tilelang not installed (.ci/setup-tilelang.sh)", allow_module_level=True)
if shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"):
    if REQUIRED:
        raise RuntimeError("nvcc not found: the sm_90a compile check cannot run")
    pytest.skip("nvcc not found", allow_module_level=True)

os.environ.setdefault("TILELANG_DEFAULT_TARGET", "nvidia/nvidia-h100")

from qla_serve.kernels import hopper  # noqa: E402

WARMUP_LIST = hopper.variants_for_heads(16, 32)          # what `qla-serve warmup --heads 16/32` builds
SUBSET = [
    hopper.Variant(16, 32, pool_dtype="float32", state_layout="vk", use_qk_l2norm=False,
                   has_initial_state=True, block_v=128),
    hopper.Variant(16, 32, pool_dtype="bfloat16", state_layout="kv", use_qk_l2norm=True,
                   has_initial_state=False, block_v=64, packed_qkv=True),
]
VARIANTS = WARMUP_LIST if os.environ.get("QLA_COMPILE_ALL") else SUBSET


@pytest.fixture(scope="module", autouse=True)
def built():
    """Build every variant under test up front, one worker process per core (nvcc is single-threaded)."""
    hopper.warmup(VARIANTS, log=None, processes=os.cpu_count())


def test_subset_is_in_the_warmup_list():
    listed = set(hopper.variants_for_heads(16, 32, state_layouts=("vk", "kv")))
    assert all(v in listed for v in SUBSET)
    assert len(WARMUP_LIST) == 32


@pytest.mark.parametrize("var", VARIANTS, ids=lambda v: f"{v.pool_dtype}-{v.state_layout}-l2{int(v.use_qk_l2norm)}"
                         f"-hi{int(v.has_initial_state)}-bv{v.block_v}-pk{int(v.packed_qkv)}")
def test_variant_compiles_for_sm90a(var):
    norm = hopper.qk_norm_kernel_for(var)        # calls asking for l2norm: the pass, then the plain kernels
    assert (norm is None) == (not var.use_qk_l2norm)
    if norm is not None:
        assert "rsqrt" in norm.get_kernel_source()
    run = var.after_l2norm_pass()
    kkt = hopper.kkt_kernel_for(run)
    fwd = hopper.fwd_kernel(run)
    assert "wgmma" in fwd.get_kernel_source(), "fused_fwd should use Hopper wgmma"
    assert "wgmma" in hopper.fwd_kernel(var, persistent=False).get_kernel_source()   # the other walk form
    assert "wgmma" in kkt.get_kernel_source()
    # The persistent walk stores a "vk" pool's final state in pairs (session 63: its scalar stores
    # were the consumers' largest stall); the one-CTA-per-item walk, whose pool may be unaligned, never.
    pairs = "qla_store_state_pairs_%s((" % ("f32" if var.pool_dtype == "float32" else "bf16")
    assert (pairs in fwd.get_kernel_source()) == (run.state_layout == "vk")
    assert pairs not in hopper.fwd_kernel(var, persistent=False).get_kernel_source()
    for heads in hopper.kkt_split_forms(run.num_k_heads, run.num_v_heads)[1:]:    # the plan's split forms
        split = hopper.kkt_kernel_for(run, heads)
        assert split is not kkt and "wgmma" in split.get_kernel_source()
    # Second lookup is served from the in-process cache: no new compile.
    n = hopper.compile_count
    hopper.fwd_kernel(run)
    assert hopper.compile_count == n


def test_kkt_solve_compiles_for_an_odd_value_head_ratio():
    """16/48 (G = 3, never split over CTAs): kkt_solve loads g and β as G + 1 rows, whole rounds of its
    128 threads, a form no even G uses (kkt_solve.py, the prologue)."""
    var = hopper.Variant(16, 48, pool_dtype="float32", state_layout="vk", use_qk_l2norm=False,
                         has_initial_state=True, block_v=128)
    assert hopper.kkt_split_forms(16, 48) == [3]
    assert "wgmma" in hopper.kkt_kernel_for(var).get_kernel_source()


def _fwd_args_on_cpu(var):
    """A well-formed call of the variant's walk on CPU tensors: the generated host code rejects it at
    its first device check, which is as far as a machine without a GPU can follow a launch."""
    import torch

    T, H, HV = 64, var.num_k_heads, var.num_v_heads
    q = torch.randn(T, H, 128).bfloat16()
    pool = torch.zeros(2, HV, 128, 128, dtype=getattr(torch, var.pool_dtype))
    args = (q, q.clone(), torch.randn(T, HV, 128).bfloat16(), torch.zeros(T, HV), torch.zeros(T, HV, 64).bfloat16(),
            torch.tensor([0, T], dtype=torch.int32), torch.tensor([1], dtype=torch.int32),
            torch.ones(1, dtype=torch.uint8), pool, torch.empty(T, HV, 128).bfloat16(), 0)
    if hopper.persistent_walk() is not False:    # fwd_kernel's default, the persistent walk, also takes
        # seq_order and its CTA count
        args += (torch.zeros(1, dtype=torch.int32), 1)
    return args


def test_direct_launch_reaches_the_same_host_checks():
    """CompiledKernel launches through the TVM-FFI entry function; the argument checks it reaches are
    the generated host code's, the same ones TileLang's wrapper leads to (same message, same order)."""
    var = SUBSET[0]
    fwd = hopper.fwd_kernel(var)
    assert isinstance(fwd, hopper.CompiledKernel) and fwd.direct is not None
    args = _fwd_args_on_cpu(var)
    messages = []
    for launch in (fwd, fwd.kernel):
        with pytest.raises(RuntimeError, match="device_type mismatch") as err:
            launch(*args)
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    with pytest.raises(RuntimeError, match="input q device_type"):       # argument order: q first
        fwd(*args)


def test_direct_launch_can_be_turned_off(monkeypatch):
    monkeypatch.setenv(hopper.DIRECT_LAUNCH_ENV, "0")
    kern = hopper.CompiledKernel(hopper.fwd_kernel(SUBSET[0]).kernel)
    assert kern.direct is None and kern._launch is kern.kernel


def test_l2norm_pass_vectorises_packed_rows_and_not_odd_strides():
    """The pass loads 16-byte vectors where the token stride allows (an engine's packed qkv rows)
    and falls back to element loads for an odd stride, which a vector load would misalign."""
    w = 2 * 16 * 128 + 32 * 128
    packed = hopper.qk_norm_kernel(16, 128, "bfloat16", (w, w)).get_kernel_source()
    odd = hopper.qk_norm_kernel(16, 128, "bfloat16", (w + 7, w + 7)).get_kernel_source()
    assert "*(uint4*)(q + " in packed and "*(uint4*)(k + " in packed
    assert "*(uint4*)(q + " not in odd and "*(uint4*)(k + " not in odd


def test_gating_kernels_compile_for_sm90a():
    """The gdn_gating kernels vLLM's warm-up builds (exact exp/log: g feeds whole-chunk exponentials)."""
    for args in hopper.gating_variants(32):
        src = hopper.gating_kernel(*args).get_kernel_source()
        assert "expf" in src and "logf" in src


def test_l2norm_pass_with_gates_compiles_for_sm90a():
    """The l2norm pass that also computes the gates, for vLLM's call forms (packed views and the
    1-token batch's compact copies; A_log fp32, dt_bias bf16; every parameter dtype pair under
    QLA_COMPILE_ALL)."""
    forms = hopper.qk_norm_gating_variants(hopper.variants_for_heads(
        16, 32, pool_dtypes=("bfloat16",), use_qk_l2norm=(True,), has_initial_state=(True,), packed_qkv=(True,),
        block_v=(128,)))
    if not os.environ.get("QLA_COMPILE_ALL"):
        forms = [f for f in forms if f[4][2:4] == ("float32", "bfloat16")]
    assert len(forms) == (8 if os.environ.get("QLA_COMPILE_ALL") else 2)
    for args in forms:
        src = hopper.qk_norm_kernel(*args).get_kernel_source()
        assert "rsqrt" in src and "expf" in src and "logf" in src


def test_conv_kernels_compile_for_sm90a():
    """The gdn_conv kernels vLLM's warm-up builds, and the other forms the op takes: vLLM's "ds" conv
    state layout, an fp32 state, a bias, no l2norm, a strided x."""
    forms = hopper.conv_variants(16, 32) + [
        (16, 32, 4, "bfloat16", "float32", "ds", True, True, False, 8192),
        (2, 4, 4, "bfloat16", "bfloat16", "sd", False, False, True, 1024 + 264),
    ]
    for args in forms:
        src = hopper.conv_kernel(*args).get_kernel_source()
        assert "rsqrtf" in src if args[7] else "rsqrtf" not in src
        assert "tma_store" in src           # a whole chunk's tile leaves in one bulk store


def test_a_kernel_built_after_the_preload_is_logged_once_with_its_time(monkeypatch, caplog):
    """After an adapter's start-up preload, a kernel that still has to be built or loaded stalls a
    serving step: it is logged (kind and seconds), and only then; before the preload, silence."""
    import logging

    monkeypatch.setattr(hopper, "_preloaded_in_process", False)
    built = []
    with caplog.at_level(logging.WARNING, logger="qla_serve"):
        hopper._get(("probe-before", 1), lambda: built.append(1) or "k1")
        assert not [r for r in caplog.records if "first use" in r.getMessage()]
        hopper.mark_preloaded()
        assert hopper._get(("probe-after", 1), lambda: built.append(2) or "k2") == "k2"
        assert hopper._get(("probe-after", 1), lambda: built.append(3) or "k3") == "k2"   # cached: no build
    msgs = [r.getMessage() for r in caplog.records if "first use" in r.getMessage()]
    assert built == [1, 2] and len(msgs) == 1 and "kernel probe-after built or loaded" in msgs[0]
    for key in (("probe-before", 1), ("probe-after", 1)):
        hopper._kernels.pop(key)


def test_abeta_dtype_agrees_between_kkt_solve_and_the_walk():
    """Aβ crosses from kkt_solve to the walk through HBM: the producer's dtype, the walk's operand
    dtype for Wᵀ Aβᵀ and the host's allocation must be one."""
    import torch
    from qla_serve.kernels.hopper import fused_fwd, kkt_solve
    assert kkt_solve.A_DTYPE == fused_fwd.HALF == "float16"
    assert hopper._abeta_dtype(torch.bfloat16) == torch.float16
