"""The walk that makes Aβ itself (``QLA_FUSED_ABETA=1``, an A/B candidate not yet run on a GPU:
``fused_fwd.build_fused_fwd``'s ``fused_abeta``).

On the CPU: the host path runs the γ-only kernel instead of kkt_solve and hands the walk β where it
handed Aβ (TileLang kernels replaced by recorders), and keeps fp32-pool V-block-128 calls off the
persistent form, whose shared memory it would overflow. Where TileLang and nvcc are there, every
walk phase of the fused form compiles for sm_90a and calls tri_inverse (required under CI=1 or
QLA_COMPILE_ALL=1, as tests/test_hopper_compile.py)."""
import os
import shutil

import pytest
import torch

from conftest import make_inputs, make_pool
from qla_serve import plan_prefill
from qla_serve.kernels import hopper

REQUIRED = bool(os.environ.get("CI") or os.environ.get("QLA_COMPILE_ALL"))


@pytest.mark.parametrize("pool_dtype,block_v,want_persistent", [(torch.float32, 128, False),
                                                                 (torch.bfloat16, 128, True),
                                                                 (torch.float32, 64, True)])
def test_host_runs_gamma_and_hands_the_walk_beta(pool_dtype, block_v, want_persistent, monkeypatch):
    monkeypatch.setenv(hopper.FUSED_ABETA_ENV, "1")
    monkeypatch.setenv(hopper.BLOCK_V_ENV, str(block_v))
    monkeypatch.setenv("QLA_CP", "0")
    seqlens, H, HV = [256, 256], 2, 4      # equal items: the plan picks the persistent form
    q, k, v, g, beta, cu = make_inputs(seqlens, H, HV, seed=3)
    pool = make_pool(3, HV, dtype=pool_dtype, seed=3)
    calls = []

    def gamma_kernel(HV_, g_stride):
        assert (HV_, g_stride) == (HV, HV)
        return lambda g_, chunk_bounds, gcum: calls.append(("gamma", g_ is g))

    def kkt_kernel_for(var, heads_per_cta=None):
        raise AssertionError("kkt_solve was built: with the walk making Aβ, warm-up does not build it")

    def fwd_kernel(var, phase=0, persistent=None):
        def run(q_, k_, v_, gcum, a, *rest):
            calls.append(("fwd", a is beta, persistent))
        return run
    monkeypatch.setattr(hopper, "gamma_kernel", gamma_kernel)
    monkeypatch.setattr(hopper, "kkt_kernel_for", kkt_kernel_for)
    monkeypatch.setattr(hopper, "fwd_kernel", fwd_kernel)
    plan = plan_prefill(cu)
    hopper.gdn_prefill_hopper(q, k, v, g, beta, state_pool=pool, state_indices=torch.tensor([1, 2]),
                              has_initial_state=None, plan=plan, scale=128 ** -0.5, use_qk_l2norm=False,
                              out=torch.empty_like(v), state_layout="vk", null_slot=None)
    assert calls == [("gamma", True), ("fwd", True, want_persistent)]


def test_the_switch_is_validated(monkeypatch):
    monkeypatch.setenv(hopper.FUSED_ABETA_ENV, "yes")
    with pytest.raises(ValueError, match="QLA_FUSED_ABETA"):
        hopper.fused_abeta()
    monkeypatch.setenv(hopper.FUSED_ABETA_ENV, "0")
    assert hopper.fused_abeta() is False


def _compiler_or_skip():
    try:
        import tilelang  # noqa: F401
    except ImportError:
        if REQUIRED:
            raise
        pytest.skip("tilelang not installed")
    if shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"):
        if REQUIRED:
            raise RuntimeError("nvcc not found")
        pytest.skip("nvcc not found")
    os.environ.setdefault("TILELANG_DEFAULT_TARGET", "nvidia/nvidia-h100")


def test_every_fused_phase_compiles_for_sm90a(monkeypatch):
    _compiler_or_skip()
    from qla_serve.kernels.hopper import cp

    monkeypatch.setenv(hopper.FUSED_ABETA_ENV, "1")
    var = hopper.Variant(16, 32, pool_dtype="bfloat16", state_layout="vk", use_qk_l2norm=False,
                         has_initial_state=True, block_v=128)
    kernels = [hopper.fwd_kernel(var, persistent=True), hopper.fwd_kernel(var, persistent=False),
               *cp.phase_kernels(var, tail=True)]
    for kern in kernels:
        src = kern.get_kernel_source()
        assert "qla_tri_inverse64(" in src and "qla_ex2_approx(" in src
    monkeypatch.setenv(hopper.FUSED_ABETA_ENV, "0")
    assert "qla_tri_inverse64" not in hopper.fwd_kernel(var, persistent=True).get_kernel_source()
    assert "cumsum" in hopper.gamma_kernel(32, 32).get_kernel_source().lower()
