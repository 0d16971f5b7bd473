"""`kitchen serve` on tiny models placed under tinker-cookbook's model names (hf_cache.py), and the
environment a cookbook script needs to reach it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tinker_backend.conftest import TEST_KEY, serve_process

from .hf_cache import LLAMA, build_hub_cache

pytest.importorskip(
    "tinker_cookbook", reason="tinker-cookbook 0.6.1 is not installed (make install)"
)


@pytest.fixture(scope="package")
def cookbook_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    root = tmp_path_factory.mktemp("cookbook")
    checkpoints = root / "checkpoints"
    checkpoints.mkdir()
    hf = {"HF_HOME": str(build_hub_cache(root / "hf"))}
    with serve_process([LLAMA], checkpoints, hf) as url:
        yield {
            **os.environ,
            **hf,
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "TINKER_BASE_URL": url,
            "TINKER_API_KEY": TEST_KEY,
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
            "KITCHEN_TEST_ROOT": str(root),
        }
