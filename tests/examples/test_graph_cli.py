"""`kitchen graph` on a Python workflow factory: a file path (default function build_workflow), a
file path with :function, or package.module:function; recipes keep working as before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kitchen.app.cli import app

from .helpers import EXAMPLES

RUNNER = CliRunner()


@pytest.mark.parametrize(
    ("example", "workflow", "state"),
    [
        ("custom_sft", "custom_sft", "CountingState"),
        ("word_game_rl", "reinforcement_sync", "RLState"),
        ("tinker_style_env", "reinforcement_sync", "RLState"),
        ("agents_sdk_rl", "reinforcement_sync", "RLState"),
        ("custom_dataset_store", "supervised_flat", "SupervisedState"),
        ("swap_backend", "supervised_flat", "SupervisedState"),
    ],
)
def test_graph_prints_each_examples_plan(example: str, workflow: str, state: str) -> None:
    result = RUNNER.invoke(app, ["graph", str(EXAMPLES / f"{example}.py")])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"workflow {workflow} (state: {state})")
    assert "[steps]" in result.output  # the training loop is in the plan


def test_graph_takes_file_and_function(tmp_path: Path) -> None:
    factory = tmp_path / "mine.py"
    factory.write_text(
        "from kitchen import Workflow, stage, BaseState\n"
        "@stage(writes={'step'})\n"
        "def tick(ctx):\n    ctx.state.step += 1\n"
        "def small():\n    return Workflow('small', BaseState, [tick])\n"
    )
    result = RUNNER.invoke(app, ["graph", f"{factory}:small"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "workflow small (state: BaseState)",
        "└─ tick  [- -> step]",
    ]


def test_graph_takes_module_and_function_from_the_current_directory(monkeypatch) -> None:
    monkeypatch.chdir(EXAMPLES)
    monkeypatch.syspath_prepend(os.getcwd())
    result = RUNNER.invoke(app, ["graph", "custom_sft:build_workflow"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("workflow custom_sft")


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("examples_nothere.py", "workflow file examples_nothere.py does not exist"),
        (f"{EXAMPLES / 'custom_sft.py'}:nope", "has no function 'nope'"),
        ("no_such_module:build", "no module named 'no_such_module'"),
    ],
)
def test_graph_names_what_is_wrong_with_a_target(target: str, message: str) -> None:
    result = RUNNER.invoke(app, ["graph", target])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_graph_refuses_a_factory_that_returns_no_workflow(tmp_path: Path) -> None:
    factory = tmp_path / "notwf.py"
    factory.write_text("def build_workflow():\n    return 42\n")
    result = RUNNER.invoke(app, ["graph", str(factory)])
    assert result.exit_code == 2
    assert "returned int, not a Workflow" in result.output


def test_graph_of_a_recipe_is_unchanged() -> None:
    result = RUNNER.invoke(app, ["graph", "sl_loop", "--batch-size", "4"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("workflow supervised_flat")
    assert "get_batch(batch_size=4, group_size=1)" in result.output
