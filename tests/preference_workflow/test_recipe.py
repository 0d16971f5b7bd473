"""The `dpo` recipe: dataset names, held-out splits, --dry-run through the CLI, the cookbook preset."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from cookbook.datasets.comparison import helpsteer3_row, hh_rlhf_row, preference_row
from cookbook.recipes.dataset_splits import resolve_dataset
from cookbook.recipes.dpo import DPO
from kitchen.app.cli import app
from kitchen.app.resolve import get_recipe, resolve_config
from kitchen.engine.validate import walk
from kitchen.workflows.common.evaluate import Evaluate
from kitchen.workflows.common.setup import LoadDataset

runner = CliRunner()


def test_dataset_names_resolve_to_source_converter_and_held_out_split() -> None:
    hhh = resolve_dataset("hhh", "comparison")
    assert (hhh.source, hhh.split, hhh.test_source, hhh.test_split) == (
        "Anthropic/hh-rlhf", "train", "Anthropic/hh-rlhf", "test",
    )  # fmt: skip
    assert hhh.convert is hh_rlhf_row
    helpsteer = resolve_dataset("helpsteer3", "comparison")
    assert helpsteer.source == "nvidia/HelpSteer3:preference"
    assert helpsteer.test_split == "validation" and helpsteer.convert is helpsteer3_row
    ultra = resolve_dataset("ultrafeedback", "comparison")
    assert (ultra.split, ultra.test_split) == ("train[1024:]", "train[:1024]")
    bundled = resolve_dataset("bundled:prefs", "comparison")
    assert (bundled.test_source, bundled.test_split) == ("bundled:prefs", "test")
    local = resolve_dataset("data/my_prefs.jsonl", "comparison")
    assert local.test_source is None and local.convert is preference_row


def loads(cfg_values: dict[str, object]) -> list[tuple[str, str, str]]:
    recipe = get_recipe("dpo")
    workflow = recipe.workflow(resolve_config(recipe, values=cfg_values).config)
    return [(n.into, n.source, n.split) for n, _ in walk(workflow.nodes) if isinstance(n, LoadDataset)]  # fmt: skip


def test_held_out_set_follows_the_dataset_or_the_flags(tmp_path: Path) -> None:
    assert loads({}) == [
        ("comparisons", "bundled:prefs", "train"),
        ("test_comparisons", "bundled:prefs", "test"),
    ]
    local = str(tmp_path / "p.jsonl")
    assert loads({"dataset": local}) == [("comparisons", local, "train")]
    assert loads({"dataset": local, "test_dataset": "bundled:prefs"})[1] == (
        "test_comparisons", "bundled:prefs", "test",
    )  # fmt: skip
    assert loads({"dataset": "ultrafeedback", "test_split": "train[:64]"})[1] == (
        "test_comparisons", "argilla/ultrafeedback-binarized-preferences", "train[:64]",
    )  # fmt: skip
    no_eval = get_recipe("dpo").workflow(
        resolve_config(get_recipe("dpo"), values={"test_dataset": None}).config
    )
    assert not any(isinstance(n, Evaluate) for n, _ in walk(no_eval.nodes))


def test_dry_run_validates_and_prints_the_plan() -> None:
    result = runner.invoke(app, ["run", "dpo", "--dry-run", "--dpo-beta", "0.1", "-b", "3"])
    assert result.exit_code == 0, result.output
    assert "config valid" in result.output
    assert "submit_train_step(loss=DPOLoss(beta=0.1)" in result.output
    assert "get_batch(batch_size=3, group_size=2)" in result.output


def test_cookbook_preset_holds_tinker_cookbooks_values() -> None:
    cfg = resolve_config(DPO(), preset="cookbook").config
    assert (cfg.model_name, cfg.backend) == ("Qwen/Qwen3.5-9B-Base", "tinker")
    # hhh, bound at resolution to the hub set it loads and that set's own test split
    assert (cfg.dataset, cfg.dataset_split) == ("Anthropic/hh-rlhf", "train")
    assert (cfg.test_dataset, cfg.test_split) == ("Anthropic/hh-rlhf", "test")
    assert (cfg.optimizer.learning_rate, cfg.dpo_beta, cfg.batch_size) == (1e-5, 0.1, 256)
    assert (cfg.max_length, cfg.optimizer.schedule, cfg.checkpoint.save_every, cfg.evaluation.every) == (
        8192, "linear", 20, 10,
    )  # fmt: skip


def test_bad_beta_is_a_usage_error() -> None:
    result = runner.invoke(app, ["run", "dpo", "--dry-run", "--dpo-beta", "0"])
    assert result.exit_code == 2
    assert "--dpo-beta" in result.output
