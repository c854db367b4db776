"""bench_serving/gpu_prebuild.py lists every kernel form the GPU tests use, so that the tests on the
lent H200 load kernels instead of compiling them one at a time inside the timed call (session 36:
18 compiles, ~4 minutes of a 377-s test call, from forms missing here)."""
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench_serving"))
import gpu_prebuild  # noqa: E402
import test_hopper_gpu as gpu_tests  # noqa: E402
from qla_serve.kernels import hopper  # noqa: E402


def _config(H, HV, kw):
    """A test case's make_case() arguments → gpu_prebuild's TEST_CONFIGS tuple."""
    return (H, HV, kw.get("pool_dtype", torch.float32), kw.get("layout", "vk"), bool(kw.get("l2_in_kernel")),
            kw.get("hinit_mode", "mix") != "none", bool(kw.get("packed")), kw.get("extra", 0))


def test_every_gpu_test_variant_is_prebuilt():
    cases = [(c[0], c[2], c[3], c[4]) for c in gpu_tests.CASES + gpu_tests.CP_CASES]
    cases += [(c[0], c[2], c[3], dict(hinit_mode="all")) for c in gpu_tests.CORRELATED]
    cases += [(tag, base[2], base[3], base[4]) for tag, base, _ in gpu_tests.WALK_FORMS]   # bases with their edits
    missing = [tag for tag, H, HV, kw in cases if _config(H, HV, kw) not in gpu_prebuild.TEST_CONFIGS]
    assert not missing, f"add their variants to gpu_prebuild.TEST_CONFIGS: {missing}"


def test_every_combine_and_gating_form_of_the_tests_is_prebuilt():
    combine = {(HV, bv, hopper.POOL_DTYPES[pdt], layout, hmode != "none")
               for _, _, _, HV, bv, pdt, layout, hmode in gpu_tests.CP_COMBINE_CASES}
    assert combine <= set(gpu_prebuild.COMBINE_TEST_FORMS), combine - set(gpu_prebuild.COMBINE_TEST_FORMS)
    # test_gating_kernel_matches_reference: HV = 32, bf16 a/b, fp32 A_log, bf16 dt_bias; compact and
    # as column views of one [T, 2·HV] buffer
    listed = set(hopper.gating_variants(32)) | set(gpu_prebuild.GATING_TEST_FORMS)
    for strides in ((32, 32), (64, 64)):
        assert (32, "bfloat16", "float32", "bfloat16", strides, 20.0) in listed, strides
