"""`kitchen serve` on tiny models placed under tinker-cookbook's model names (hf_cache.py), and the
environment a cookbook script needs to reach it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tinker_backend.conftest import START_TIMEOUT_S, free_port, stop, wait_healthy

from .hf_cache import LLAMA, build_hub_cache

pytest.importorskip(
    "tinker_cookbook", reason="tinker-cookbook 0.6.1 is not installed (make install)"
)


@pytest.fixture(scope="package")
def cookbook_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    root = tmp_path_factory.mktemp("cookbook")
    port = free_port()
    env = {
        **os.environ,
        "HF_HOME": str(build_hub_cache(root / "hf")),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "TINKER_BASE_URL": f"http://127.0.0.1:{port}",
        "TINKER_API_KEY": "tml-kitchen-test",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    log = (root / "serve.log").open("wb")
    cmd = [sys.executable, "-m", "kitchen.app.cli", "serve", "--port", str(port), "--model", LLAMA]
    cmd += ["--checkpoint-dir", str(root / "checkpoints")]
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_healthy(env["TINKER_BASE_URL"], proc, START_TIMEOUT_S)
        yield {**env, "KITCHEN_TEST_ROOT": str(root)}
    finally:
        stop(proc)
        log.close()
