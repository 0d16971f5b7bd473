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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib.util import find_spec
from pathlib import Path

import httpx
import numpy as np
import pytest
from click.testing import Result
from tinker import types

from tests.helpers import TINY_VLM

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
    start_timeout: float = START_TIMEOUT_S,
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
        wait_healthy(url, proc, start_timeout)
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


# Smaller than each recipe's own defaults where the recipe has the field: 2 steps stay quick.
SHRINK = {
    "batch_size": 2,
    "group_size": 2,
    "groups_per_batch": 2,
    "max_tokens": 8,
    "sample_max_tokens": 8,
    "num_samples_to_show": 1,
    "num_test_problems": 2,
    "test_size": 4,
    "max_length": 256,
    "humaneval_limit": 1,
    "humaneval_max_tokens": 8,
    "max_turns": 1,
    "teacher_model": TINY,
    "math_teacher_model": TINY,
    "chat_teacher_model": TINY,
    "teacher_max_tokens": 8,
    "max_prompts": 4,
    "math_groups_per_batch": 1,
    "chat_groups_per_batch": 1,
}


# text_arena's default game is the textarena package's (the Makefile installs it); without it,
# its built-in one
if find_spec("textarena") is None:
    SHRINK["game"] = "builtin"


def run_two_steps(recipe: str, base_url: str, log_dir: Path) -> Result:
    """`kitchen run RECIPE --backend tinker` on the tiny model, shrunk, for 2 steps."""
    from typer.testing import CliRunner

    from kitchen.app.cli import app
    from kitchen.app.resolve import get_recipe

    config = get_recipe(recipe).Config
    overrides = [f"{k}={v}" for k, v in SHRINK.items() if k in config.model_fields]
    model = TINY  # a recipe whose prompts carry images: the tiny VLM, with LoRA (Tinker's only)
    if getattr(config, "takes_images", False):
        model, overrides = TINY_VLM, [*overrides, "lora_rank=4"]
    args = ["run", recipe, "--backend", "tinker", f"model_name={model}", f"base_url={base_url}"]
    args += [*overrides, "--max-steps", "2", "--log-dir", str(log_dir), "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return result


TwoSteps = Callable[[str], tuple[Result, Path]]


@pytest.fixture(scope="package")
def two_step_runs() -> dict[str, tuple[Result, Path]]:
    return {}


@pytest.fixture
def two_steps(
    sdk_env: str,
    two_step_runs: dict[str, tuple[Result, Path]],
    tmp_path_factory: pytest.TempPathFactory,
) -> TwoSteps:
    """run_two_steps(recipe), run once per recipe for the package: test_recipes and test_step_time
    read the same runs (each is a 2-step training run through the server)."""

    def run(recipe: str) -> tuple[Result, Path]:
        if recipe not in two_step_runs:
            log_dir = tmp_path_factory.mktemp(f"two-steps-{recipe}")
            two_step_runs[recipe] = (run_two_steps(recipe, sdk_env, log_dir), log_dir)
        return two_step_runs[recipe]

    return run


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
