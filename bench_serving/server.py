"""Start and stop one ``vllm serve`` on 127.0.0.1, and talk to it (used by the runner and tests).

The server runs in its own process group; :meth:`VLLMServer.stop` signals that group by PID
(SIGINT, then SIGKILL after a grace period), so the engine core and workers go with it.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Sequence

SERVED_NAME = "tiny"

# Settings that make the tiny model serve on a small CPU box (ARCHITECTURE §4).
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vllm_executable() -> str:
    exe = Path(sys.executable).with_name("vllm")
    return str(exe) if exe.exists() else "vllm"


class VLLMServer:
    """``vllm serve MODEL ARGS`` on a loopback port; a context manager."""

    def __init__(self, model: str | Path, args: Sequence[str] = (), *, env: dict[str, str] | None = None,
                 log_path: str | Path | None = None, served_name: str = SERVED_NAME,
                 startup_timeout: float = 600.0, port: int | None = None):
        self.model = str(model)
        self.args = list(args)
        self.env = dict(env or {})
        self.served_name = served_name
        self.port = port or free_port()
        self.log_path = Path(log_path) if log_path else None
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen | None = None
        self._log = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return [vllm_executable(), "serve", self.model, "--host", "127.0.0.1", "--port", str(self.port),
                "--served-model-name", self.served_name, *self.args]

    def start(self) -> "VLLMServer":
        """Launch and wait until ``/health`` answers."""
        return self.launch().wait_healthy()

    def launch(self) -> "VLLMServer":
        """Start the process without waiting (start several, then ``wait_healthy`` each)."""
        env = {**os.environ, **CPU_ENV, **self.env}
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "w")
        out = self._log or subprocess.DEVNULL
        self.proc = subprocess.Popen(self.command(), env=env, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self._launched = time.monotonic()
        return self

    def wait_healthy(self) -> "VLLMServer":
        assert self.proc is not None, "launch() first"
        deadline = self._launched + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited with {self.proc.returncode} before it was healthy"
                                   + (f"; log: {self.log_path}\n{self.log_tail()}" if self.log_path else ""))
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(1.0)
        self.stop()
        raise TimeoutError(f"vllm serve was not healthy within {self.startup_timeout:.0f}s")

    def stop(self, grace: float = 20.0) -> None:
        if self.proc is None:
            return
        pid = self.proc.pid
        if self.proc.poll() is None:
            try:
                os.killpg(pid, signal.SIGINT)
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.killpg(pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
            except ProcessLookupError:
                pass
        # children left in the group (engine core, workers) go with the group
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc = None
        if self._log:
            self._log.close()
            self._log = None

    def log_tail(self, n: int = 40) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def __enter__(self) -> "VLLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def metric_sum(self, name: str, timeout: float = 30.0) -> float:
        """Sum of every sample of Prometheus metric ``name`` (all label sets) from ``/metrics``."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=timeout) as r:
            text = r.read().decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(name) and line[len(name):len(name) + 1] in ("{", " "))

    # -- requests -------------------------------------------------------------------------------
    def complete(self, prompt_ids: Sequence[int], max_tokens: int, *, logprobs: int | None = None,
                 prompt_logprobs: int | None = None, timeout: float = 600.0) -> dict[str, Any]:
        """Greedy ``/v1/completions`` on token ids; returns the first choice."""
        body: dict[str, Any] = {"model": self.served_name, "prompt": list(prompt_ids), "max_tokens": max_tokens,
                                "temperature": 0.0, "return_token_ids": True, "ignore_eos": True}
        if logprobs is not None:
            body["logprobs"] = logprobs
        if prompt_logprobs is not None:
            body["prompt_logprobs"] = prompt_logprobs
        req = urllib.request.Request(self.url + "/v1/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())["choices"][0]
