"""The console command: info, demo, warm-up planning."""
from __future__ import annotations

import json

import pytest

from qla_serve.cli import main
from qla_serve.warmup import variants_for


def test_info_names_backends_and_reasons(capsys):
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    assert "prefill: -> reference" in text
    assert "tilelang   needs a CUDA device, got cpu" in text
    assert "torch 2." in text


def test_info_json(capsys):
    assert main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["dispatch (K=V=128)"]["prefill"]["reference"] == "ok"
    assert info["versions"]["torch"]


def test_demo_checks_against_oracle(capsys):
    assert main(["demo", "--requests", "5", "--max-len", "150", "--budget", "96", "--seed", "3"]) == 0
    text = capsys.readouterr().out
    assert "PASS" in text and "| backend" in text


def test_warmup_variants_from_config():
    qwen3_next = {"linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
                  "linear_value_head_dim": 128}
    assert variants_for(qwen3_next, tp_sizes=[1, 2, 8]) == [(16, 32), (8, 16), (2, 4)]
    assert variants_for({"text_config": {"linear_num_key_heads": 16, "linear_num_value_heads": 64}}) == [(16, 64)]
    with pytest.raises(ValueError, match="linear_num_key_heads"):
        variants_for({"hidden_size": 8})
    with pytest.raises(ValueError, match="tp=3"):
        variants_for(qwen3_next, tp_sizes=[3])


def test_bad_heads_argument():
    with pytest.raises(SystemExit):
        main(["demo", "--heads", "3/4"])


def test_preload_refuses_where_no_kernel_runs(monkeypatch):
    import torch

    from qla_serve import warmup

    monkeypatch.setattr(warmup, "_preloaded", set())
    logged = []
    assert "cpu" in warmup.preload(torch.device("cpu"), 16, 32, torch.bfloat16, log=logged.append)
    monkeypatch.setenv("QLA_BACKEND", "reference")
    assert warmup.preload(torch.device("cuda", 0), 16, 32, torch.bfloat16, log=logged.append) == "QLA_BACKEND=reference"
    assert logged == []


def test_preload_loads_the_engines_variants(monkeypatch):
    """On an sm_90 device: exactly the variants the vLLM adapter can hit, loaded in this process."""
    import contextlib
    import importlib.util

    import torch

    from qla_serve import warmup
    from qla_serve.kernels import hopper

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "device", lambda d: contextlib.nullcontext())
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: object() if n == "tilelang" else real_find_spec(n, *a))
    monkeypatch.setattr(warmup, "_preloaded", set())
    seen = []
    monkeypatch.setattr(hopper, "warmup", lambda variants, log=None, processes=None: seen.append((list(variants), processes)))
    gates, convs, norms = [], [], []
    monkeypatch.setattr(hopper, "gating_kernel", lambda *a: gates.append(a))
    monkeypatch.setattr(hopper, "conv_kernel", lambda *a: convs.append(a))
    monkeypatch.setattr(hopper, "qk_norm_kernel", lambda *a: norms.append(a))
    monkeypatch.delenv(warmup.VLLM_CONV_ENV, raising=False)
    monkeypatch.delenv(warmup.VLLM_PREP_ENV, raising=False)
    logged = []
    assert warmup.preload(torch.device("cuda", 0), 2, 8, torch.bfloat16, log=logged.append) is None
    (variants, processes), = seen
    assert processes is None          # in-process: no worker pool inside an engine's worker
    # views of vLLM's conv output, l2norm in the op
    assert {(v.num_k_heads, v.num_v_heads, v.pool_dtype, v.use_qk_l2norm, v.has_initial_state, v.packed_qkv)
            for v in variants} == {(2, 8, "bfloat16", True, True, True)}
    # the adapter hands its raw gate inputs: they ride in the l2norm pass, for each call form
    assert gates == []
    assert norms == hopper.qk_norm_gating_variants(variants)
    w = 2 * 2 * 128 + 8 * 128
    assert {(n[3], n[4]) for n in norms} == {(st, spec) for st in ((w, w), (256, 256))
                                             for spec in hopper.gating_variants(8)}
    assert convs == []
    assert sorted(v.block_v for v in variants) == sorted(hopper.BLOCK_V_CHOICES)
    assert len(logged) == 1 and "2/8" in logged[0] and "bfloat16" in logged[0]
    # once per process: a second call (every later profiling run / extend) does nothing
    assert warmup.preload(torch.device("cuda", 0), 2, 8, torch.bfloat16, log=logged.append) is None
    assert len(seen) == 1 and len(logged) == 1
    assert "float16" in warmup.preload(torch.device("cuda", 0), 2, 8, torch.float16, log=logged.append)
    # with qla_serve.gdn_conv (QLA_VLLM_CONV=qla): views of its output without l2norm, and its kernels
    monkeypatch.setenv(warmup.VLLM_CONV_ENV, "qla")
    seen.clear()
    assert warmup.preload(torch.device("cuda", 0), 2, 16, torch.bfloat16, log=logged.append) is None
    (variants, _), = seen
    assert {(v.use_qk_l2norm, v.packed_qkv) for v in variants} == {(False, True)}
    assert convs == hopper.conv_variants(2, 16)
    assert gates == hopper.gating_variants(16)    # no l2norm pass: the gates take their own kernel
    monkeypatch.setenv(warmup.VLLM_CONV_ENV, "fast")
    with pytest.raises(ValueError, match="QLA_VLLM_CONV"):
        warmup.vllm_conv_choice()
    monkeypatch.delenv(warmup.VLLM_CONV_ENV)
    # a failing load is reported, never raised (the server keeps its lazy path)
    monkeypatch.setattr(hopper, "warmup", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("nvcc died")))
    assert "nvcc died" in warmup.preload(torch.device("cuda", 0), 4, 16, torch.float32, log=logged.append)


def test_info_probe_is_a_call_the_hopper_kernel_takes():
    """`qla-serve info` must report the kernel on an H200: its probe passes the kernel's own checks
    (device and capability aside, which need the GPU)."""
    import torch

    from qla_serve import dispatch
    from qla_serve.kernels import hopper

    assert hopper.why_not(dispatch.info_probe(torch.device("cpu"))) is None


def test_l2norm_variants_run_the_pass_then_the_plain_kernels(monkeypatch):
    """A variant asking for l2norm runs qk_norm first, then kkt_solve and the walk of the variant
    without l2norm on compact q, k (v, out, g, beta as handed in): for vLLM-style contiguous
    inputs that is the plain contiguous variant, for SGLang's packed views one with v's stride."""
    from qla_serve.kernels import hopper

    H, HV = 16, 32
    w = 2 * H * 128 + HV * 128
    contiguous = hopper.Variant(H, HV, use_qk_l2norm=True)
    packed = hopper.Variant(H, HV, use_qk_l2norm=True, packed_qkv=True, has_initial_state=False)
    assert contiguous.after_l2norm_pass() == hopper.Variant(H, HV)
    run = packed.after_l2norm_pass()
    assert not run.use_qk_l2norm and not run.packed_qkv
    assert run.resolved_strides() == (H * 128, H * 128, w, HV * 128, HV, HV)
    assert hopper.Variant(H, HV).after_l2norm_pass() == hopper.Variant(H, HV)
    # A 1-token batch runs on compact copies: warm-up builds that form of every packed variant too
    assert packed.call_forms()[1].after_l2norm_pass() == hopper.Variant(H, HV, has_initial_state=False)
    assert contiguous.call_forms() == (contiguous,)
    monkeypatch.setenv(hopper.L2NORM_ENV, "kernel")            # A/B aid: l2norm inside the kernels
    assert packed.after_l2norm_pass() == packed
    monkeypatch.setenv(hopper.L2NORM_ENV, "fast")
    with pytest.raises(ValueError, match="QLA_L2NORM"):
        hopper.l2norm_in_pass()
