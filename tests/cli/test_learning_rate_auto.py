"""`learning_rate=auto` (any spelling of the learning rate, any layer): the recommended learning
rate of the model the config resolves to, LoRA or full, written into config.json as a number."""

from __future__ import annotations

import re
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


def _rates(*args: str, **kw: object) -> tuple[float, float, float]:
    cfg = resolve_config("rlhf_pair_pref", args=list(args), **kw).config  # type: ignore[arg-type]
    return cfg.optimizer.learning_rate, cfg.sft_learning_rate, cfg.pm_learning_rate  # type: ignore[attr-defined]


def test_auto_reaches_the_section_rates_of_rlhf_pair_pref(tmp_path: Path) -> None:
    """learning_rate=auto makes every section rate the recipe's config leaves unset auto; a
    section rate takes auto on its own; a later number wins over an earlier auto, either way."""
    smol = get_lr("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert _rates() == (3e-4, 3e-4, 1e-3)  # the recipe's defaults, untouched without auto
    assert _rates("learning_rate=auto") == pytest.approx((smol, smol, smol))
    assert _rates("--sft-learning-rate", "auto") == pytest.approx((3e-4, smol, 1e-3))
    assert _rates("pm_learning_rate=auto", "-l", "5e-5") == pytest.approx((5e-5, 3e-4, smol))
    assert _rates("-l", "auto", "sft_learning_rate=1e-4") == pytest.approx((smol, 1e-4, smol))
    config = tmp_path / "c.yaml"
    config.write_text("learning_rate: auto\n")
    assert _rates("-l", "2e-5", config_file=config) == (2e-5, 3e-4, 1e-3)
    # the preset's section rates are an earlier layer: the command line's auto overrides them
    qwen = "Qwen/Qwen3.5-9B-Base"
    preset = resolve_config("rlhf_pair_pref", preset="cookbook", args=["-l", "auto"]).config
    assert (preset.sft_learning_rate, preset.pm_learning_rate) == pytest.approx(  # type: ignore[attr-defined]
        (get_lr(qwen, is_lora=True), get_lr(qwen, is_lora=True))
    )


def test_the_sections_train_at_the_auto_rates() -> None:
    smol = get_lr("HuggingFaceTB/SmolLM2-135M-Instruct")
    result = runner.invoke(app, ["run", "rlhf_pair_pref", "--dry-run", "learning_rate=auto"])
    assert result.exit_code == 0, result.output
    rates = [float(x) for x in re.findall(r"learning_rate=([0-9.e-]+)", result.output)]
    assert rates == pytest.approx([smol] * 3)  # the sft, preference_model and rl sections
