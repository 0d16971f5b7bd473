"""tinker-cookbook 0.6.1's own scripts, unmodified, against `kitchen serve` on tiny models: the
smallest runs that exercise each path. All start at once (the server batches their requests), and
each test then waits for its own."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .hf_cache import LLAMA

# tinker-cookbook's code against a `kitchen serve` process (its scripts in processes of their own).
# one pytest-xdist worker for the package: cookbook_env starts a `kitchen serve` per worker it runs on
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cookbook_compat")]

TIMEOUT_S = 240
COMMON = [f"model_name={LLAMA}"]
RECIPES = {
    "sl_loop": ["tinker_cookbook.recipes.sl_loop", "batch_size=2", "lora_rank=4", "save_every=0"],
    # Its default loss is stable_reinforce: sampler records, provenance spans, the loss.
    "rl_loop": [
        "tinker_cookbook.recipes.rl_loop",
        "batch_size=1",
        "group_size=2",
        "lora_rank=4",
        "save_every=0",
        "max_tokens=6",
    ],
    "math_rl_arithmetic": [
        "tinker_cookbook.recipes.math_rl.train",
        "groups_per_batch=2",
        "group_size=2",
        "max_tokens=5",
        "lora_rank=4",
        "eval_every=0",
        "save_every=0",
        "max_steps=2",
    ],
    "dpo": [
        "tinker_cookbook.recipes.preference.dpo.train",
        "batch_size=2",
        "max_length=64",
        "max_steps=2",
    ],
    "on_policy_distillation": [
        "tinker_cookbook.recipes.distillation.on_policy_distillation",
        f"teacher_model={LLAMA}",
        "group_size=2",
        "groups_per_batch=2",
        "max_tokens=6",
        "lora_rank=4",
        "eval_every=0",
        "save_every=0",
        "max_steps=2",
    ],
    "guess_number": [
        "tinker_cookbook.recipes.multiplayer_rl.guess_number.train",
        "renderer_name=llama3",
        "batch_size=1",
        "group_size=2",
        "max_tokens=8",
        "eval_every=0",
        "save_every=0",
        "max_steps=1",
    ],
}


@pytest.fixture(scope="module")
def runs(cookbook_env: dict[str, str]) -> Iterator[dict[str, tuple[subprocess.Popen[bytes], Path]]]:
    root = Path(cookbook_env["KITCHEN_TEST_ROOT"])
    started = {}
    for name, (module, *args) in RECIPES.items():
        log_path = root / "runs" / name
        cmd = [sys.executable, "-m", "tests.cookbook_compat.offline_data", module, *COMMON, *args]
        cmd += [f"log_path={log_path}"]
        if "max_steps" in " ".join(args) or name == "dpo":
            cmd += ["behavior_if_log_dir_exists=delete"]
        out = root / f"{name}.out"
        with out.open("wb") as sink:
            proc = subprocess.Popen(cmd, env=cookbook_env, stdout=sink, stderr=subprocess.STDOUT)
        started[name] = (proc, out)
    yield started
    for proc, _ in started.values():
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_cookbook_recipe_runs_unchanged_against_kitchen_serve(
    recipe: str, runs: dict[str, tuple[subprocess.Popen[bytes], Path]]
) -> None:
    proc, out = runs[recipe]
    start = time.monotonic()
    try:
        code = proc.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"{recipe} ran past {TIMEOUT_S} s:\n{out.read_text()[-3000:]}")
    text = out.read_text()
    assert code == 0, (
        f"{recipe} exited {code} after {time.monotonic() - start:.0f} s:\n{text[-3000:]}"
    )
    assert "completed" in text.lower()
