"""tinker-cookbook 0.6.1's own vlm_classifier training loop, unchanged, against `kitchen serve`:
its ClassifierDataset renders the bundled shapes pictures (offered as caltech101, offline_data.py)
with its Qwen3-VL renderer and the image processor it loads by model name, and its supervised
train.main sends the image chunks through the tinker SDK for a few steps, then samples held-out
pictures for its accuracy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import TINY_VLM, place_in_hub_cache

# tinker-cookbook's code against the package's `kitchen serve` (cookbook_env; its script in a
# process of its own), on the package's pytest-xdist worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cookbook_compat")]

pytest.importorskip(
    "tinker_cookbook", reason="tinker-cookbook 0.6.1 is not installed (make install)"
)

# A Qwen3-VL name the cookbook's renderer table knows; the tiny VLM stands in for it offline.
VLM_NAME = "Qwen/Qwen3-VL-30B-A3B-Instruct"
TIMEOUT_S = 300


def test_cookbook_vlm_classifier_trains_through_kitchen_serve(
    cookbook_env: dict[str, str], tmp_path: Path
) -> None:
    # the serve loads a model from the hub cache when a client first names it
    place_in_hub_cache(Path(cookbook_env["HF_HOME"]) / "hub", VLM_NAME, TINY_VLM)
    cmd = [
        sys.executable, "-m", "tests.cookbook_compat.offline_data",
        "tinker_cookbook.recipes.vlm_classifier.train",
        f"experiment_dir={tmp_path / 'runs'}", "dataset=caltech101",
        f"model_name={VLM_NAME}", "renderer_name=qwen3_vl_instruct",
        "batch_size=4", "lora_rank=4", "max_steps=3", "eval_every=2", "save_every=0",
        "n_eval=4", "max_tokens=8", "behavior_if_log_dir_exists=delete",
    ]  # fmt: skip
    done = subprocess.run(cmd, env=cookbook_env, capture_output=True, text=True, timeout=TIMEOUT_S)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    (metrics_file,) = (tmp_path / "runs").glob("*/metrics.jsonl")
    metrics = [json.loads(line) for line in metrics_file.read_text().splitlines()]
    trained = [m for m in metrics if "train_mean_nll" in m]
    assert [m["step"] for m in trained] == [0, 1, 2]
    assert all(m["num_tokens"] > 0 for m in trained)
    assert any("test/accuracy" in k or k.endswith("accuracy") for m in metrics for k in m)
