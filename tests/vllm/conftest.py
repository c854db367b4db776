"""vLLM end-to-end tests: run inside the vLLM CPU venv (``bash .ci/setup-vllm.sh``)::

    .venv-vllm/bin/python -m pytest tests/vllm -q

Each server pair (vLLM's own GDN path and qla-serve) is started once per session and shared by
every case that needs that configuration. Servers run on 127.0.0.1 and are stopped by PID.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

try:  # `vllm.plugins`, not `vllm`: this folder itself can pass for a namespace package "vllm"
    import vllm.plugins  # noqa: F401
except ImportError:
    # No vLLM here (run in the venv from .ci/setup-vllm.sh): collect nothing from this folder.
    collect_ignore_glob = ["test_*.py"]

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench_serving"))

import tiny_model  # noqa: E402
from server import VLLMServer  # noqa: E402

# Chunked prefill forced small so a 2000-token prompt is 16 chunks, each one reading the state
# the previous chunk wrote into vLLM's cache.
CHUNK = 128
COMMON = ["--enforce-eager", "--max-model-len", "4096", "--max-num-batched-tokens", str(CHUNK),
          "--max-num-seqs", "16", "--seed", "0"]


@pytest.fixture(scope="session")
def chunk() -> int:
    return CHUNK


@pytest.fixture(scope="session")
def serve_args() -> list[str]:
    return list(COMMON)


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    return tiny_model.build(ROOT / ".work" / "tiny-qwen3-next")


class Pair:
    """Two servers of one configuration: ``base`` (vLLM's GDN path) and ``qla``."""

    def __init__(self, model: Path, logdir: Path, extra: list[str], qla_args: list[str]):
        self.trace = logdir / "qla-trace.jsonl"
        self.base_trace = logdir / "base-trace.jsonl"
        # The plugin is loaded in both; only the qla server selects it. The base server gets a
        # trace path too: it must stay empty (the plugin changes nothing until selected).
        self.base = VLLMServer(model, COMMON + extra, env={"QLA_VLLM_TRACE": str(self.base_trace)},
                               log_path=logdir / "base.log")
        self.qla = VLLMServer(model, COMMON + extra + qla_args, env={"QLA_VLLM_TRACE": str(self.trace)},
                              log_path=logdir / "qla.log")

    def __enter__(self):
        for s in (self.base, self.qla):
            s.launch()
        try:
            for s in (self.base, self.qla):
                s.wait_healthy()
        except Exception:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        for s in (self.base, self.qla):
            s.stop()

    def trace_records(self) -> list[dict]:
        import json

        if not self.trace.exists():
            return []
        return [json.loads(line) for line in self.trace.read_text().splitlines()]


@pytest.fixture(scope="session")
def pair_no_prefix_cache(tiny_model_dir, tmp_path_factory):
    """Prefix caching off; qla selected with ``--attention-backend qla``."""
    with Pair(tiny_model_dir, tmp_path_factory.mktemp("pair-noprefix"), ["--no-enable-prefix-caching"],
              ["--attention-backend", "qla"]) as p:
        yield p


@pytest.fixture(scope="session")
def pair_prefix_cache(tiny_model_dir, tmp_path_factory):
    """Prefix caching on (mamba 'align' mode); qla selected with ``--additional-config``."""
    with Pair(tiny_model_dir, tmp_path_factory.mktemp("pair-prefix"), ["--enable-prefix-caching"],
              ["--additional-config", '{"gdn_prefill_backend": "qla"}']) as p:
        yield p
