"""`learning_rate=auto` (any spelling of the learning rate, any layer): the recommended learning
rate of the model the config resolves to, LoRA or full, written into config.json as a number."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kitchen.app.cli import app
from kitchen.app.resolve import resolve_config
from train_core.hyperparams import get_lr

runner = CliRunner()


def _lr(*args: str, **kw: object) -> float:
    return resolve_config("sl_basic", args=list(args), **kw).config.optimizer.learning_rate  # type: ignore[arg-type]


def test_auto_is_get_lr_of_the_resolved_model() -> None:
    qwen = "Qwen/Qwen3.5-9B"
    assert _lr("learning_rate=auto", "-m", qwen) == pytest.approx(get_lr(qwen))
    assert _lr("-l", "auto", "-m", qwen, "--lora-rank", "0") == pytest.approx(
        get_lr(qwen, is_lora=False)
    )
    assert _lr("optimizer.learning_rate=auto", "--model", "meta-llama/Llama-3.1-8B") == (
        pytest.approx(get_lr("meta-llama/Llama-3.1-8B"))
    )


def test_the_last_layer_decides(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("learning_rate: auto\nmodel_name: Qwen/Qwen3-8B\n")
    assert _lr(config_file=config) == pytest.approx(get_lr("Qwen/Qwen3-8B"))
    assert _lr("-l", "3e-4", config_file=config) == 3e-4  # a flag after the file wins
    preset = resolve_config("sl_basic", preset="cookbook", args=["-l", "auto"])
    assert preset.config.optimizer.learning_rate == pytest.approx(get_lr(preset.config.model_name))
    nested = resolve_config("sl_basic", values={"optimizer": {"learning_rate": "auto"},
                                                "model_name": "Qwen/Qwen3-32B"})  # fmt: skip
    assert nested.config.optimizer.learning_rate == pytest.approx(get_lr("Qwen/Qwen3-32B"))


def test_a_model_without_a_formula_is_one_line() -> None:
    result = runner.invoke(
        app, ["run", "sl_basic", "--dry-run", "-m", "openai/gpt-oss-20b", "-l", "auto"]
    )
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: learning_rate=auto: recommended lr: no calibrated")
    assert result.output.strip().count("\n") == 0
