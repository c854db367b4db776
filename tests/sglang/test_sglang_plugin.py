"""The qla plugin inside SGLang 0.5.23 (CPU): loading through ``load_plugins()``, the server flags,
their resolution (extra_buffer radix cache and overlap scheduler kept), the kernel dispatcher
(qla extends, Triton decodes and verifies), and hook failures that stop start-up."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.sglang

from sglang.srt.arg_groups import resolution_hooks  # noqa: E402
from sglang.srt.arg_groups.choices import LINEAR_ATTN_KERNEL_BACKEND_CHOICES  # noqa: E402
from sglang.srt.arg_groups.overrides import resolving_view  # noqa: E402
from sglang.srt.plugins import load_plugins  # noqa: E402
from sglang.srt.server_args import prepare_server_args  # noqa: E402

from qla_serve.integrations.sglang import hooks  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def plugins():
    load_plugins()
    assert hooks.missing_hooks() == []


@pytest.fixture
def qwen3_next_dir(tmp_path, monkeypatch):
    """A tiny Qwen3-Next config on disk, and a platform that allows extra_buffer (as CUDA does)."""
    from transformers import Qwen3NextConfig

    cfg = Qwen3NextConfig(
        hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=128, linear_value_head_dim=128,
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64, shared_expert_intermediate_size=64,
        intermediate_size=128, vocab_size=2048, full_attention_interval=4)
    cfg.architectures = ["Qwen3NextForCausalLM"]
    cfg.save_pretrained(tmp_path)
    import sglang.srt.arg_groups.mamba_hook as mamba_hook

    monkeypatch.setattr(mamba_hook, "_platform_supports_mamba_cache_extra_buffer", lambda: True)
    return str(tmp_path)


class Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture
def qla_log():
    log = logging.getLogger("qla_serve.sglang")
    handler, old = Lines(), log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    yield handler.lines
    log.removeHandler(handler)
    log.setLevel(old)


def resolve(*argv):
    sa = prepare_server_args(list(argv))
    sa.resolve_once()
    return sa, resolving_view(sa)


def test_plugin_is_an_entry_point_and_offers_the_choice():
    from importlib.metadata import entry_points

    assert [e.value for e in entry_points(group="sglang.srt.plugins") if e.name == "qla"] == [
        "qla_serve.integrations.sglang:register"]
    assert LINEAR_ATTN_KERNEL_BACKEND_CHOICES.count("qla") == 1


@pytest.mark.parametrize("flag", ["--linear-attn-backend", "--linear-attn-prefill-backend"])
def test_flags_parse(flag):
    sa = prepare_server_args(["--model-path", "dummy", flag, "qla"])
    assert getattr(sa, flag[2:].replace("-", "_")) == "qla"


def test_decode_flag_is_refused():
    with pytest.raises(ValueError, match="no GDN decode kernel"):
        resolve("--model-path", "dummy", "--linear-attn-decode-backend", "qla")


@pytest.mark.parametrize("flags, base, prefill", [
    ((), "triton", None),
    (("--linear-attn-backend", "qla"), "triton", "qla"),
    (("--linear-attn-prefill-backend", "qla"), "triton", "qla"),
])
def test_resolution_keeps_extra_buffer_and_overlap(qwen3_next_dir, qla_log, flags, base, prefill):
    _, cfg = resolve("--model-path", qwen3_next_dir, "--device", "cpu", "--skip-tokenizer-init", *flags)
    assert (cfg.linear_attn_backend, cfg.linear_attn_prefill_backend) == (base, prefill)
    assert cfg.mamba_radix_cache_strategy == "extra_buffer"
    assert cfg.disable_overlap_schedule is False
    said = [line for line in qla_log if "--linear-attn-backend qla" in line]
    if flags[:1] == ("--linear-attn-backend",):
        assert len(said) == 1 and "extra_buffer" in said[0] and "overlap" in said[0]
    else:
        assert said == []


def test_without_the_resolution_hook_the_base_flag_would_cost_extra_buffer(qwen3_next_dir, monkeypatch):
    """Why the resolution hook exists: SGLang keys extra_buffer on the base flag being triton."""
    kept = [fn for fn in resolution_hooks._HOOKS.get(hooks.RESOLUTION_STEP, []) if fn is not hooks.resolve_flags]
    monkeypatch.setitem(resolution_hooks._HOOKS, hooks.RESOLUTION_STEP, kept)
    _, cfg = resolve("--model-path", qwen3_next_dir, "--device", "cpu", "--skip-tokenizer-init",
                     "--linear-attn-backend", "qla")
    assert cfg.mamba_radix_cache_strategy == "no_buffer" and cfg.disable_overlap_schedule is True


@pytest.mark.parametrize("flags, qla_extends", [
    (("--linear-attn-backend", "qla"), True),
    (("--linear-attn-prefill-backend", "qla"), True),
    ((), False),
])
def test_dispatcher_extends_with_qla_and_keeps_triton_for_decode_and_verify(flags, qla_extends):
    from sglang.srt.layers.attention.linear.gdn_backend import GDNKernelDispatcher
    from sglang.srt.layers.attention.linear.kernels.gdn_triton import TritonGDNKernel
    from sglang.srt.layers.attention.linear.utils import resolve_linear_attn_backends
    from sglang.srt.runtime_context import get_context

    from qla_serve.integrations.sglang.kernel import QLAGDNKernel

    sa, _ = resolve("--model-path", "dummy", *flags)
    get_context().set_server_args(sa)
    chosen = resolve_linear_attn_backends()
    d = GDNKernelDispatcher(chosen.decode, chosen.prefill, chosen.verify)
    assert isinstance(d.extend_kernel, QLAGDNKernel if qla_extends else TritonGDNKernel)
    for kernel in (d.decode_kernel, d.verify_kernel, d.tree_verify_kernel):
        assert type(kernel) is TritonGDNKernel
    assert d.supports_packed_decode == TritonGDNKernel.supports_packed_decode
    if qla_extends:   # SGLang then asks extend() for the radix cache's fp32 snapshot, never for h
        assert d.extend_kernel.supports_track_state_snapshot and not d.extend_uses_state_checkpoints


def test_forward_extend_hook_lends_host_lengths_for_the_call():
    from types import SimpleNamespace

    from qla_serve.integrations.sglang.kernel import QLAGDNKernel

    kernel = QLAGDNKernel()
    backend = SimpleNamespace(kernel_dispatcher=SimpleNamespace(extend_kernel=kernel), mis_metadata=None)
    batch = SimpleNamespace(extend_seq_lens_cpu=[5, 70], forward_mode=SimpleNamespace(is_target_verify=lambda: False))
    seen = []
    hooks.forward_extend(lambda self, layer, fb: seen.append(kernel.host_seqlens) or "out", backend, None, batch)
    assert seen == [[5, 70]] and kernel.host_seqlens is None


FAILING_HOOK = textwrap.dedent("""
    import sys
    from sglang.srt.plugins.hook_registry import HookRegistry
    real = HookRegistry._apply_target.__func__

    def apply(cls, target, hooks):
        if target.endswith("GDNKernelDispatcher.__init__"):
            raise AttributeError("simulated: SGLang moved GDNKernelDispatcher")
        return real(cls, target, hooks)

    HookRegistry._apply_target = classmethod(apply)
    from sglang.srt.plugins import load_plugins
    load_plugins()
    from sglang.srt.server_args import prepare_server_args
    prepare_server_args(["--model-path", "dummy"]).resolve_once()
    print("RESOLVED-WITHOUT-QLA", flush=True)
    try:
        prepare_server_args(["--model-path", "dummy"] + sys.argv[1:]).resolve_once()
    except RuntimeError as exc:
        print("REFUSED:", exc, flush=True)
        sys.exit(3)
    print("STARTED", flush=True)
""")


@pytest.mark.parametrize("flag", ["--linear-attn-backend", "--linear-attn-prefill-backend"])
def test_a_hook_that_fails_to_apply_stops_start_up(flag):
    env = dict(os.environ, SGLANG_PLUGINS="qla")
    proc = subprocess.run([sys.executable, "-c", FAILING_HOOK, flag, "qla"], capture_output=True, text=True,
                          env=env, timeout=300)
    out = proc.stdout + proc.stderr
    assert "RESOLVED-WITHOUT-QLA" in out, out[-3000:]
    assert "Failed to apply hooks to sglang.srt.layers.attention.linear.gdn_backend.GDNKernelDispatcher" in out
    assert proc.returncode == 3, out[-3000:]
    assert "REFUSED: qla-serve: SGLang did not apply qla-serve's hook(s) on " in out
    assert "GDNKernelDispatcher.__init__ (hook not applied)" in out
    assert "STARTED" not in out


def test_start_up_says_when_extra_buffer_snapshots_leave_the_fast_backend(qwen3_next_dir, monkeypatch):
    from sglang.srt.runtime_context import get_context, get_exec

    from qla_serve import dispatch

    sa, cfg = resolve("--model-path", qwen3_next_dir, "--device", "cpu", "--skip-tokenizer-init",
                      "--linear-attn-backend", "qla")
    get_context().set_server_args(sa)
    assert get_exec().mamba.enable_mamba_extra_buffer
    assert hooks.snapshot_notice() is None          # CPU: the reference backend writes snapshots itself

    class NoCheckpoints:
        name = "fast"

        def why_not(self, op, call):
            return "no per-chunk checkpoints yet" if call.get("checkpoints") is not None else None

    monkeypatch.setattr(dispatch, "BACKENDS", (NoCheckpoints(), *dispatch.BACKENDS))
    notice = hooks.snapshot_notice()
    assert notice and "\n" not in notice
    assert "fast backend cannot write them (no per-chunk checkpoints yet)" in notice
    assert "--mamba-radix-cache-strategy no_buffer" in notice
