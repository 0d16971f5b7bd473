"""The supervised recipes on the local engine with a tiny model: short runs, and resume equivalence."""

import json
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file
from typer.testing import CliRunner

from kitchen.app.cli import app
from kitchen.app.launch import run
from kitchen.engine.runner import BaseHook
from tests.helpers import chat_files, tiny_sft_config

pytestmark = pytest.mark.slow


@pytest.fixture
def cfg(tmp_path):
    return tiny_sft_config(
        tmp_path,
        batch_size=4,
        save_every=2,
        eval_every=0,
        test_dataset=None,
        no_register=True,
        learning_rate=1e-2,
    )


@pytest.mark.parametrize("recipe", ["sl_basic", "sl_loop", "chat_sl"])
def test_each_recipe_runs_three_steps_on_the_tiny_model(recipe, tmp_path):
    train, test = chat_files(tmp_path, n=24)
    args = [
        "run",
        recipe,
        "-m",
        "kitchen/tiny-llama",
        "-d",
        train,
        "-b",
        "4",
        "--max-steps",
        "3",
        "--log-dir",
        str(tmp_path / recipe),
        "--no-progress",
        "--no-register",
    ]
    if recipe == "sl_loop":
        args += ["--dtype", "float32"]  # the override reaches the engine and config.json
    else:
        args += [
            "--test-dataset",
            test,
            "--test-split",
            "train",
            "--num-samples-to-show",
            "1",
            "--sample-max-tokens",
            "8",
        ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    records = [
        json.loads(line) for line in (tmp_path / recipe / "metrics.jsonl").read_text().splitlines()
    ]
    assert [r["step"] for r in records if "train_mean_nll" in r] == [0, 1, 2]
    assert all(np.isfinite(r["train_mean_nll"]) for r in records if "train_mean_nll" in r)
    # config.json says which dtype `--dtype auto` resolved to on this machine, or the one asked for
    config = json.loads((tmp_path / recipe / "config.json").read_text())
    assert (
        config["dtype"] == "float32"
        if recipe == "sl_loop"
        else config["dtype"]
        in {
            "float32",
            "bfloat16",
        }
    )
    asked = "float32" if recipe == "sl_loop" else "auto"
    assert f"compute dtype {config['dtype']} (--dtype {asked})" in result.output  # said at start


class KillAfter(BaseHook):
    """Simulates a kill (Ctrl-C) once the given step has finished."""

    def __init__(self, step):
        self.step = step

    def on_step_end(self, step, metrics):
        if step == self.step:
            raise KeyboardInterrupt


def _adapter(log_dir: Path) -> dict[str, np.ndarray]:
    final = json.loads((log_dir / "checkpoints.jsonl").read_text().splitlines()[-1])
    assert final["name"] == "final"
    files = sorted(Path(final["state_path"]).rglob("*.safetensors"))
    assert files, final["state_path"]
    return {k: v for f in files for k, v in load_file(str(f)).items()}


def _nll(log_dir: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in (log_dir / "metrics.jsonl").read_text().splitlines()]
    out: dict[int, float] = {}
    for r in rows:
        if "train_mean_nll" in r:
            assert r["step"] not in out, f"step {r['step']} logged twice"
            out[r["step"]] = r["train_mean_nll"]
    return out


def test_four_steps_straight_equal_two_kill_resume_two(cfg, tmp_path):
    four_steps = partial(run, "sl_basic", cfg, backend="local", max_steps=4)
    four_steps(log_dir=tmp_path / "straight")
    with pytest.raises(KeyboardInterrupt):
        four_steps(log_dir=tmp_path / "killed", hooks=[KillAfter(2)])
    # the kill came after step 2 ran but before it was checkpointed: resume restarts at step 2
    four_steps(log_dir=tmp_path / "killed", if_exists="resume")

    straight, resumed = _nll(tmp_path / "straight"), _nll(tmp_path / "killed")
    assert sorted(resumed) == [0, 1, 2, 3]
    assert resumed == pytest.approx(straight, abs=1e-6)
    a, b = _adapter(tmp_path / "straight"), _adapter(tmp_path / "killed")
    assert a.keys() == b.keys() and a
    for k in a:
        np.testing.assert_allclose(a[k], b[k], atol=1e-6, err_msg=k)
    assert straight[3] < straight[0]
