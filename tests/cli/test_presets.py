"""Recipe presets live in presets/NAME.yaml beside the recipe: every one must build its recipe's
config and reach it value for value (a YAML slip such as `1e-5`, read as a string, would not)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from cookbook.recipes.sl_basic import SLBasicConfig
from kitchen.app.resolve import build_config, get_recipe
from kitchen.engine.plugins import RECIPES
from kitchen.engine.recipe import Recipe, load_presets, presets_path
from kitchen.workflows.common.config import flat_name, flat_values

PRESETS = [(name, p) for name in RECIPES.names() for p in get_recipe(name).presets]


@pytest.mark.parametrize(("name", "preset"), PRESETS)
def test_every_preset_builds_with_its_values(name: str, preset: str) -> None:
    rec = get_recipe(name)
    values = flat_values(build_config(rec, [rec.presets[preset]], bind=False))
    for key, value in rec.presets[preset].items():
        got: Any = values[flat_name(rec.Config, key)]
        assert (got, type(got)) == (value, type(value)), (key, got)


def test_every_preset_file_belongs_to_a_recipe_that_loads_it() -> None:
    sl_basic = presets_path(type(get_recipe("sl_basic")))
    assert sl_basic is not None
    files = sorted(sl_basic.parent.glob("*.yaml"))
    assert len(files) >= 11
    for path in files:
        assert get_recipe(path.stem).presets == load_presets(path), path.name


def test_config_comes_from_the_type_argument_unless_set() -> None:
    class Inferred(Recipe[SLBasicConfig]):
        name = "inferred"

    class Explicit(Recipe[Any]):
        Config = BaseModel

    assert (Inferred.Config, Explicit.Config, Inferred.presets) == (SLBasicConfig, BaseModel, {})


def test_a_malformed_preset_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("cookbook: 3\n")
    with pytest.raises(ValueError, match=r"bad\.yaml: expected a mapping"):
        load_presets(tmp_path / "bad.yaml")


@pytest.mark.parametrize("name", RECIPES.names())
def test_every_listed_recipe_dry_runs_its_cookbook_preset(name: str) -> None:
    """Each recipe `kitchen list` shows has tinker-cookbook's run as `--preset cookbook`, and it
    resolves and validates (a recipe added later is held to the same)."""
    from typer.testing import CliRunner

    from kitchen.app.cli import app

    listed = CliRunner().invoke(app, ["list"], terminal_width=200)
    assert re.search(rf"^\s*{name}\s", listed.output, re.MULTILINE), listed.output
    result = CliRunner().invoke(app, ["run", name, "--preset", "cookbook", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert f"recipe {name}: config valid" in result.output
