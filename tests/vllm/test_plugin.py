"""Plugin registration: idempotent, no CUDA, version gate, CLI and selection (no servers)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from qla_serve.integrations import vllm as plugin


def run_py(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_importing_the_plugin_module_does_not_import_vllm():
    out = run_py("""
        import sys
        import qla_serve.integrations.vllm as p
        print('vllm' in sys.modules, callable(p.register))
    """)
    assert out.split() == ["False", "True"]


def test_register_is_idempotent_and_does_not_initialise_cuda():
    out = run_py("""
        import torch
        from vllm.plugins import load_general_plugins
        load_general_plugins()                         # vLLM's own loader: runs our entry point
        import qla_serve.integrations.vllm as p
        p.register(); p.register()                     # and again, directly
        from vllm.model_executor.custom_op import op_registry_oot
        from vllm.v1.attention.backends.registry import AttentionBackendEnum
        from vllm.platforms import current_platform
        cls = op_registry_oot["QwenGatedDeltaNetAttention"]
        print(cls.__module__ + "." + cls.__qualname__)
        print(AttentionBackendEnum["QLA"].name, AttentionBackendEnum._member_names_.count("QLA"))
        fn = type(current_platform).get_attn_backend_cls.__func__
        print(getattr(fn, "_qla_wrapped", False), getattr(getattr(fn, "__wrapped__", None), "_qla_wrapped", False))
        print("cuda_initialized", torch.cuda.is_initialized())
    """)
    lines = out.strip().splitlines()
    assert lines[0] == "qla_serve.integrations.vllm.layer.QLAGatedDeltaNetAttention"
    assert lines[1] == "QLA 1"
    assert lines[2] == "True False"  # wrapped once, not twice
    assert lines[3] == "cuda_initialized False"


def test_qla_member_unpickles_in_a_fresh_process():
    """vLLM may spawn its engine core and unpickle the config before loading plugins."""
    out = run_py("""
        import pickle, subprocess, sys
        import qla_serve.integrations.vllm as p
        p.register()
        from vllm.v1.attention.backends.registry import AttentionBackendEnum
        blob = pickle.dumps({"backend": AttentionBackendEnum.QLA})
        child = "import pickle,sys; d=pickle.loads(sys.stdin.buffer.read()); print(d['backend'].name)"
        r = subprocess.run([sys.executable, "-c", child], input=blob, capture_output=True)
        print(r.stdout.decode().strip(), r.returncode)
    """)
    assert out.strip() == "QLA 0"


@pytest.mark.parametrize("version", ["0.25.1", "0.34.0", "1.0.0", "garbage"])
def test_unsupported_vllm_version_names_the_range(version):
    with pytest.raises(plugin.UnsupportedVLLMVersion, match=r"vLLM >= 0\.26\.0, < 0\.34\.0.*found vLLM"):
        plugin.check_vllm_version(version)


@pytest.mark.parametrize("version", ["0.26.0", "0.32.0+cpu", "0.33.1"])
def test_supported_vllm_versions(version):
    assert plugin.check_vllm_version(version) == version


def test_register_raises_on_unsupported_installed_version():
    out = run_py("""
        import qla_serve.integrations.vllm as p
        p.vllm_version = lambda: "0.20.0"
        try:
            p.register()
        except p.UnsupportedVLLMVersion as e:
            print("raised:", e)
    """)
    assert "raised: qla-serve's vLLM plugin supports vLLM >= 0.26.0, < 0.34.0; found vLLM 0.20.0" in out


def test_cli_accepts_gdn_prefill_backend_qla():
    out = run_py("""
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.utils.argparse_utils import FlexibleArgumentParser
        parser = AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())   # loads plugins first
        a = parser.parse_args(["--gdn-prefill-backend", "qla", "--attention-backend", "qla"])
        print(a.gdn_prefill_backend, a.attention_backend)
        parser = AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())   # a second parser too
        print(parser.parse_args(["--gdn-prefill-backend", "triton"]).gdn_prefill_backend)
    """)
    assert out.split() == ["qla", "qla", "triton"]


def test_selection_spellings():
    plugin.register()
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    from qla_serve.integrations.vllm.selection import qla_requested

    def cfg(backend=None, extra=None):
        return SimpleNamespace(attention_config=SimpleNamespace(backend=backend), additional_config=extra or {})

    assert qla_requested(cfg(AttentionBackendEnum.QLA))
    assert qla_requested(cfg(extra={"gdn_prefill_backend": "qla"}))
    assert qla_requested(cfg(extra={"gdn_prefill_backend": " QLA "}))
    assert not qla_requested(cfg())
    assert not qla_requested(cfg(AttentionBackendEnum.CPU_ATTN))
    # an explicit GDN prefill backend wins over --attention-backend qla
    assert not qla_requested(cfg(AttentionBackendEnum.QLA, {"gdn_prefill_backend": "triton"}))
    assert qla_requested(cfg(AttentionBackendEnum.QLA, {"gdn_prefill_backend": "auto"}))


def test_full_attention_under_qla_is_the_platform_default():
    plugin.register()
    from vllm.platforms import current_platform
    from vllm.v1.attention.backends.registry import AttentionBackendEnum
    from vllm.v1.attention.selector import AttentionSelectorConfig
    import torch

    sel = AttentionSelectorConfig(head_size=64, dtype=torch.bfloat16, kv_cache_dtype="auto", block_size=None)
    assert current_platform.get_attn_backend_cls(AttentionBackendEnum.QLA, sel) == \
        current_platform.get_attn_backend_cls(None, sel)


def test_kernel_probe_is_asked_once_per_pool_dtype_and_batch_size(monkeypatch):
    """On CUDA the adapter asks qla-serve's kernels whether they take a step's prefill; the answer
    is kept per layer (it was tens of µs of host time per layer per step), and asked again when the
    sequence count or the pool changes."""
    import torch

    from qla_serve import dispatch
    from qla_serve.integrations.vllm import engine_ops

    asked = []

    class Picky:
        name = "tilelang"

        def why_not(self, op, call):
            asked.append(call["plan"].num_seqs)
            return None if call["plan"].num_seqs < 3 else "too many sequences"

    monkeypatch.setattr(engine_ops, "IS_CUDA", True)
    monkeypatch.setattr(engine_ops, "IS_CPU", False)
    monkeypatch.setattr(dispatch, "BACKENDS", (Picky(), dispatch.ReferenceBackend()))
    monkeypatch.delenv(dispatch.BACKEND_ENV, raising=False)
    layer = SimpleNamespace(num_k_heads=2, num_v_heads=4, tp_size=1, head_k_dim=8, head_v_dim=8,
                            kv_cache=(None, torch.zeros(5, 4, 8, 8)), A_log=torch.zeros(4),
                            dt_bias=torch.zeros(4, dtype=torch.bfloat16))
    plan = lambda n: SimpleNamespace(num_seqs=n)  # noqa: E731
    for _ in range(3):
        assert engine_ops.kernel_why_not(layer, plan(2), torch.bfloat16) is None
    why = engine_ops.kernel_why_not(layer, plan(4), torch.bfloat16)
    assert why is not None and "tilelang: too many sequences" in why
    assert engine_ops.kernel_why_not(layer, plan(4), torch.bfloat16) == why
    assert asked == [2, 4]
    layer.kv_cache = (None, torch.zeros(5, 4, 8, 8, dtype=torch.bfloat16))  # a new pool: ask again
    assert engine_ops.kernel_why_not(layer, plan(2), torch.bfloat16) is None
    assert asked == [2, 4, 2]
    monkeypatch.setenv(dispatch.BACKEND_ENV, "tilelang")  # a forced backend is honoured as is
    assert engine_ops.kernel_why_not(layer, plan(4), torch.bfloat16) is None


def test_fallback_prefill_binds_vllms_own_kernel_choice(monkeypatch):
    """QLA_VLLM_FALLBACK_PREFILL picks the kernel of vLLM's own path in a qla-serve server the way
    vLLM picks it (the op's bound forward method: forward_native = Triton/FLA, forward_cuda =
    FlashInfer); unset changes nothing; CPU ignores it and says so; a bad value names the variable."""
    from vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn import ChunkGatedDeltaRule

    from qla_serve.integrations.vllm import engine_ops

    assert callable(ChunkGatedDeltaRule.forward_native) and callable(ChunkGatedDeltaRule.forward_cuda)

    class Op:
        def forward_native(self):
            return "triton"

        def forward_cuda(self):
            return "flashinfer"

    def layer():
        op = Op()
        op._forward_method, op.gdn_prefill_backend = op.forward_cuda, "flashinfer"
        return SimpleNamespace(chunk_gated_delta_rule=op, gdn_prefill_backend="flashinfer")

    monkeypatch.delenv(engine_ops.FALLBACK_PREFILL_ENV, raising=False)
    lay = layer()
    assert engine_ops.choose_fallback_prefill(lay) is None and lay.chunk_gated_delta_rule._forward_method() == "flashinfer"
    monkeypatch.setenv(engine_ops.FALLBACK_PREFILL_ENV, "triton")
    monkeypatch.setattr(engine_ops, "IS_CUDA", False)
    assert "ignored" in engine_ops.choose_fallback_prefill(lay)
    assert lay.chunk_gated_delta_rule._forward_method() == "flashinfer"
    monkeypatch.setattr(engine_ops, "IS_CUDA", True)
    assert "triton" in engine_ops.choose_fallback_prefill(lay)
    assert lay.chunk_gated_delta_rule._forward_method() == "triton"
    assert lay.gdn_prefill_backend == lay.chunk_gated_delta_rule.gdn_prefill_backend == "triton"
    monkeypatch.setenv(engine_ops.FALLBACK_PREFILL_ENV, "cutlass")
    with pytest.raises(ValueError, match="QLA_VLLM_FALLBACK_PREFILL"):
        engine_ops.choose_fallback_prefill(layer())
    monkeypatch.setenv(engine_ops.FALLBACK_PREFILL_ENV, "triton")
    with pytest.raises(RuntimeError, match="QLA_VLLM_FALLBACK_PREFILL"):
        engine_ops.choose_fallback_prefill(SimpleNamespace(gdn_prefill_backend="flashinfer"))


def test_step_timer_attaches_builder_notes_to_the_step_that_follows(monkeypatch, tmp_path):
    """The metadata builder runs before a step's layers; its host time must land on that step's
    line, once, and not on the next one."""
    import json

    import torch

    from qla_serve.integrations.vllm import timing

    path = tmp_path / "steps.jsonl"
    monkeypatch.setenv(timing.ENV, str(path))
    monkeypatch.setattr(timing, "_timer", None)
    tm = timing.timer()
    md = SimpleNamespace(num_prefills=1, num_prefill_tokens=8, num_decode_tokens=0)
    x = torch.zeros(8)
    tm.note("qla_builder_ms", 0.25)
    tm.note("qla_builder_ms", 0.5)          # two builds before one step add up
    def core(t):                            # a layer core that marks two pieces
        t.add_(1)
        tm.lap("conv")
        t.add_(0)
        tm.lap("op")

    for _ in range(3):                      # three steps of two GDN layers
        for layer in ("l0", "l1"):
            tm.mark(layer)
            tm.run("qla", md, core, x)
    tm.lap("stray")                         # outside a core: ignored
    tm.mark("l0")                           # the next step ends the third
    lines = [json.loads(s) for s in path.read_text().splitlines()]
    assert [r["step"] for r in lines] == [1, 2, 3] and all(r["layers"] == 2 for r in lines)
    assert lines[0]["qla_builder_ms"] == 0.75
    assert "qla_builder_ms" not in lines[1] and "qla_builder_ms" not in lines[2]
    assert float(x[0]) == 6.0               # every layer ran exactly once
    for r in lines:                         # per layer: host ms ≥ the thread's CPU ms ≥ 0; its pieces
        assert len(r["layer_host_ms"]) == len(r["layer_cpu_ms"]) == len(r["layer_pieces_ms"]) == 2
        for host, cpu, pieces in zip(r["layer_host_ms"], r["layer_cpu_ms"], r["layer_pieces_ms"]):
            assert set(pieces) == {"conv", "op"} and 0 <= cpu <= host * 1.05 + 0.01
            assert sum(pieces.values()) <= host + 1e-3


def test_conv_tables_of_a_prefill_only_step_are_vllms_own():
    """A step without decodes: vLLM's builder already made the causal-conv tables for exactly the
    prefill slice, so the plugin hands those on instead of computing them again."""
    import torch

    from qla_serve.integrations.vllm import engine_ops

    tables = SimpleNamespace(nums_dict={8: {"tot": 3}}, batch_ptr=object(), token_chunk_offset_ptr=object())
    got = engine_ops.conv_metadata(torch.tensor([0, 5, 24], dtype=torch.int32), torch.device("cuda", 0), tables)
    assert got.nums_dict is tables.nums_dict and got.batch_ptr is tables.batch_ptr
    assert got.token_chunk_offset_ptr is tables.token_chunk_offset_ptr
    assert engine_ops.conv_metadata(torch.tensor([0, 5]), torch.device("cpu"), tables) is None  # CPU: none needed
