"""Config groups: a nested field set by its flat name, its path or a nested dict alike, from flags,
key=value and Python; recipes change inherited defaults in `defaults`, never by redeclaring. Which
flags each recipe takes, and their defaults, are pinned by docs/cli.md (tests/docs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from kitchen.app.launch import run
from kitchen.app.resolve import get_recipe, parse_overrides, resolve_config
from kitchen.engine.errors import ConfigError
from kitchen.engine.plugins import RECIPES
from kitchen.workflows.common.config import TrainConfig, all_defaults, flat_fields


def test_no_recipe_config_redeclares_an_inherited_field() -> None:
    for name in RECIPES.names():
        model = get_recipe(name).Config
        inherited = set().union(
            *(base.model_fields for base in model.__mro__[1:] if hasattr(base, "model_fields"))
        )
        own = set(vars(model).get("__annotations__", {}))
        assert not own & inherited, f"{name}: redeclares {own & inherited}; use `defaults`"


def test_defaults_name_existing_fields() -> None:
    for name in RECIPES.names():
        model = get_recipe(name).Config
        known = set(flat_fields(model)) | {d for d, _ in flat_fields(model).values()}
        assert set(all_defaults(model)) <= known | set(model.model_fields), name


def test_flat_and_dotted_names_set_the_same_field() -> None:
    rec = get_recipe("sl_basic")
    flat = resolve_config(
        rec, values={"batch_size": 4, "learning_rate": 3e-4, "adam_beta1": 0.8}
    ).config
    dotted = resolve_config(
        rec, values={"optimizer.learning_rate": 3e-4, "optimizer.beta1": 0.8}
    ).config
    assert (flat.optimizer.learning_rate, flat.optimizer.beta1, flat.batch_size) == (3e-4, 0.8, 4)
    assert dotted.optimizer == flat.optimizer
    # a partial section keeps the recipe's other defaults (sl_basic: eval every 8 steps)
    nested = resolve_config(
        rec, values={"optimizer": {"beta2": 0.9}, "evaluation": {"every": 3}}
    ).config
    assert (nested.optimizer.learning_rate, nested.optimizer.beta2) == (2e-4, 0.9)
    assert nested.evaluation.every == 3


def test_cli_flags_and_key_value_reach_the_nested_field() -> None:
    rec = get_recipe("math_rl")
    args = ["--adam-beta1", "0.8"] if "adam_beta1" in flat_fields(rec.Config) else []
    args += [
        "--kl-penalty-coef",
        "0.05",
        "kl.discount_factor=0.5",
        "eval_temperature=0.7",
        "-l",
        "1e-3",
    ]
    cfg = resolve_config(rec, args=args).config
    assert (cfg.kl.penalty_coef, cfg.kl.discount_factor) == (0.05, 0.5)
    assert (cfg.evaluation.temperature, cfg.optimizer.learning_rate) == (0.7, 1e-3)


def test_flags_win_over_preset_for_nested_fields() -> None:
    rec = get_recipe("dpo")
    cfg = resolve_config(rec, args=["-l", "2e-5"], preset="cookbook").config
    assert (cfg.optimizer.learning_rate, cfg.batch_size) == (2e-5, 256)


def test_a_bad_nested_value_names_its_flag() -> None:
    with pytest.raises(ConfigError, match="--adam-beta1: Input should be less than 1"):
        resolve_config(get_recipe("sl_basic"), values={"adam_beta1": 2})
    with pytest.raises(ConfigError, match=r"optimizer\.betaa is not an option"):
        parse_overrides(get_recipe("sl_basic").Config, ["optimizer.betaa=1"], "sl_basic")


def test_python_run_takes_flat_names(tmp_path: Path) -> None:
    result = run(
        "sl_basic",
        {"batch_size": 4, "learning_rate": 3e-4, "adam_beta1": 0.8, "model_name": "kitchen/tiny-llama",
         "save_every": 0, "eval_every": 0, "no_register": True, "num_samples_to_show": 0},
        backend="fake",
        log_dir=tmp_path / "run",
        max_steps=1,
    )  # fmt: skip
    config = json.loads((tmp_path / "run" / "config.json").read_text())["config"]
    assert config["optimizer"]["beta1"] == 0.8 and config["optimizer"]["learning_rate"] == 3e-4
    assert result.metrics


def test_train_config_subclasses_inherit_defaults() -> None:
    class Base(TrainConfig):
        defaults: ClassVar[dict[str, Any]] = {"learning_rate": 1e-3, "save_every": 5}

    class Child(Base):
        defaults: ClassVar[dict[str, Any]] = {"save_every": 7}

    cfg = Child()
    assert (cfg.optimizer.learning_rate, cfg.checkpoint.save_every) == (1e-3, 7)
