"""A `--preset cookbook` recipe, as a Tinker user runs it: the cookbook's own model name
(Qwen/Qwen3.5-9B, renderer qwen3_5) through the real SDK against `kitchen serve`, where an offline
Hugging Face cache maps that name to a tiny model with the family's thinking tokens."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import FAMILY_TOKENS, place_in_hub_cache

from .conftest import TEST_KEY, serve_process

COOKBOOK_MODEL = "Qwen/Qwen3.5-9B"
SMALL = ["group_size=2", "groups_per_batch=2", "max_tokens=8", "num_test_problems=2"]


@pytest.mark.slow
def test_math_rl_cookbook_preset_runs_two_steps_under_its_model_name(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    place_in_hub_cache(hub, COOKBOOK_MODEL, "kitchen/tiny-qwen", FAMILY_TOKENS)
    checkpoints = tmp_path / "serve"
    checkpoints.mkdir()
    env = {"HF_HUB_CACHE": str(hub)}
    with serve_process([COOKBOOK_MODEL], checkpoints, env) as url:
        log_dir = tmp_path / "run"
        cmd = [sys.executable, "-m", "kitchen.app.cli", "run", "math_rl", "--preset", "cookbook"]
        cmd += ["--backend", "tinker", f"base_url={url}", *SMALL, "--max-steps", "2"]
        cmd += ["--log-dir", str(log_dir), "--no-progress"]
        run_env = {**os.environ, **env, "HF_HUB_OFFLINE": "1", "TINKER_API_KEY": TEST_KEY}
        result = subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "done: 2 steps" in result.stdout
    config = json.loads((log_dir / "config.json").read_text())["config"]
    assert config["model_name"] == COOKBOOK_MODEL
    assert "renderer_name='qwen3_5'" in (log_dir / "plan.txt").read_text()
    metrics = [json.loads(line) for line in (log_dir / "metrics.jsonl").read_text().splitlines()]
    assert {m.get("step") for m in metrics} >= {0, 1}
