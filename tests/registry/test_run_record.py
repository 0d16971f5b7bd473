"""A run's config is decided once: config.json, the workflow and the model registry's record of
the run hold the same values, whatever the recipe decides from its config (Recipe.bind: a
dataset's short name, the held-out set that follows it) (issue 33)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kitchen.adapters.model_registry import open_registry
from kitchen.app.launch import run
from kitchen.app.resolve import get_recipe, resolve_config
from kitchen.engine.plugins import RECIPES
from kitchen.engine.validate import walk
from kitchen.workflows.common.register import RegisterModel

# Its registering section is built when it runs: checked through a run below.
SECTIONED = {"rlhf_pair_pref"}


def as_json(cfg: Any) -> dict[str, Any]:
    return json.loads(cfg.model_dump_json())


@pytest.mark.parametrize("name", sorted(set(RECIPES.names()) - SECTIONED))
def test_the_workflow_registers_the_resolved_config(name: str) -> None:
    resolved = resolve_config(name)
    registers = [n for n, _ in walk(resolved.workflow.nodes) if isinstance(n, RegisterModel)]
    assert registers, f"{name}: no register_model node"
    assert [r.config for r in registers] == [as_json(resolved.config)] * len(registers)


@pytest.mark.parametrize("name", sorted(RECIPES.names()))
def test_binding_a_bound_config_changes_nothing(name: str) -> None:
    """A run resumed or repeated from its config.json resolves to the config it recorded."""
    recipe = get_recipe(name)
    for values in ({}, {"dataset": "hhh"} if name == "dpo" else {}):
        bound = resolve_config(recipe, values=values).config
        assert as_json(recipe.bind(bound)) == as_json(bound)
        again = resolve_config(recipe, values=as_json(bound)).config
        assert as_json(again) == as_json(bound)


# Small runs; for the recipes that bind, values their bind changes (a held-out set that follows
# the training set).
RUNS = {
    "dpo": {"test_size": 4, "batch_size": 2},
    "sl_basic": {"batch_size": 2},
    "sl_loop": {"test_dataset": "auto", "batch_size": 2},
    "rlhf_pair_pref": {"num_batches": 1, "rl_eval_every": 0, "pm_eval_every": 0,
                       "max_comparisons": 4, "num_test_comparisons": 2, "group_size": 2,
                       "sft_batch_size": 2, "pm_batch_size": 2,
                       "groups_per_batch": 1, "tournament": "all_pairs_one_way"},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(RUNS))
def test_config_json_equals_the_registry_record(name: str, tmp_path: Path) -> None:
    registry = tmp_path / "models.db"
    values = {**RUNS[name], "registry": str(registry), "registry_name": name}
    values["register_model"] = True  # a fake run registers only when asked
    run(name, values, backend="fake", log_dir=tmp_path / "run", max_steps=1)
    recorded = json.loads((tmp_path / "run" / "config.json").read_text())["config"]
    record = open_registry(str(registry)).get(name, 1)
    assert recorded == record.config
    if name not in SECTIONED:  # and the run loaded what the config says
        assert recorded["test_dataset"] not in ("auto", None)
        loaded = {recorded["dataset"], recorded["test_dataset"]}
        assert record.datasets and {d.name for d in record.datasets} <= loaded
