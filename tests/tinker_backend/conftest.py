"""A `kitchen serve` subprocess on a free loopback port (the session's one, server_url, is in
tests/conftest.py), and the environment the official SDK (and `--backend tinker`) reads to reach
it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
import pytest
from tinker import types

TINY = "kitchen/tiny-llama"
TEST_KEY = "tml-kitchen-test"
START_TIMEOUT_S = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, proc: subprocess.Popen[bytes] | None, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"kitchen serve exited with {proc.returncode} before it was ready")
        try:
            if httpx.get(f"{url}/api/v1/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"kitchen serve at {url} not ready after {timeout:.0f} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextmanager
def serve_process(
    models: list[str],
    checkpoints: Path,
    env: dict[str, str] | None = None,
    extra_args: Sequence[str] = (),
) -> Iterator[str]:
    """`kitchen serve` (the real CLI, its own process) with `models` preloaded; yields its URL."""
    port = free_port()
    log = (checkpoints / "serve.log").open("wb")
    full_env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        **(env or {}),
    }
    cmd = [sys.executable, "-m", "kitchen.app.cli", "serve", "--port", str(port)]
    for model in models:
        cmd += ["--model", model]
    cmd += ["--checkpoint-dir", str(checkpoints), *extra_args]
    proc = subprocess.Popen(cmd, env=full_env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, START_TIMEOUT_S)
        yield url
    except RuntimeError as e:
        log.flush()
        raise RuntimeError(f"{e}; log:\n{Path(log.name).read_text()[-3000:]}") from None
    finally:
        stop(proc)
        log.close()


@pytest.fixture
def sdk_env(server_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """What an unmodified SDK script needs to talk to the server."""
    monkeypatch.setenv("TINKER_API_KEY", TEST_KEY)
    monkeypatch.setenv("TINKER_BASE_URL", server_url)
    return server_url


def sft_datum(tokens: list[int]) -> types.Datum:
    """Next-token prediction on every token."""
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": np.asarray(tokens[1:], dtype=np.int64),
            "weights": np.ones(len(tokens) - 1, dtype=np.float32),
        },
    )


TEXTS = [
    "What is 12 + 35? The answer is 47.",
    "The kitchen opens before sunrise, when the ovens are still cold.",
]
