"""Each agentic recipe dry-runs on its defaults and on `--preset cookbook`, and the preset holds
tinker-cookbook's own values: one table, a row a recipe (what is particular to a recipe stays in
its own test file)."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import pytest

from cookbook.recipes.guess_number import GuessNumberConfig
from cookbook.recipes.rubric import RubricConfig
from cookbook.recipes.search_tool import SearchToolConfig
from cookbook.recipes.shorter import ShorterConfig
from cookbook.recipes.text_arena import TextArenaConfig
from cookbook.recipes.twenty_questions import TwentyQuestionsConfig
from kitchen.app.resolve import resolve_config
from tests.agentic.helpers import dry_run

# recipe, its config class, the env factory its default plan builds, the cookbook preset's values
# (by dotted field name)
COOKBOOK = [
    ("rubric", RubricConfig, "RubricEnvs",
     {"model_name": "Qwen/Qwen3.5-9B", "grader_model": "Qwen/Qwen3.6-35B-A3B", "grader_max_tokens": 2048,
      "groups_per_batch": 100, "group_size": 4, "optimizer.learning_rate": 1e-5}),
    ("twenty_questions", TwentyQuestionsConfig, "TwentyQuestionsEnvs",
     {"model_name": "Qwen/Qwen3.5-4B", "answerer_model": "Qwen/Qwen3.5-9B", "answerer_max_tokens": 5,
      "groups_per_batch": 64, "group_size": 8, "optimizer.learning_rate": 3e-5}),
    ("search_tool", SearchToolConfig, "SearchEnvs",
     {"model_name": "Qwen/Qwen3.5-4B", "dataset": "PeterJinGo/nq_hotpotqa_train", "retriever": "chroma",
      "chroma_collection": "wiki_embeddings", "groups_per_batch": 512, "group_size": 8, "max_turns": 5,
      "max_tokens": 1024, "optimizer.learning_rate": 4e-5, "seed": 2, "n_results": 3}),
    ("shorter", ShorterConfig, "ShorterPrompts",
     {"model_name": "Qwen/Qwen3.5-4B", "group_size": 16, "groups_per_batch": 32,
      "optimizer.learning_rate": 3e-5, "max_tokens": 64, "num_prompts": 1024}),
    # the game is made when the run starts: its default dry run needs no game package
    ("text_arena", TextArenaConfig, "TextArenaEnvs",
     {"model_name": "Qwen/Qwen3.5-4B", "groups_per_batch": 256, "num_games": 20480,
      "test_opponent": "base_model", "game": "textarena"}),
    ("guess_number", GuessNumberConfig, "GuessNumberEnvs",
     {"model_name": "Qwen/Qwen3.5-4B", "rules": "cookbook", "guess_low": 0, "guess_high": 1024,
      "guess_max_turns": 10, "group_size": 8, "groups_per_batch": 32,
      "optimizer.learning_rate": 3e-5, "max_tokens": 64}),
]  # fmt: skip


@pytest.mark.parametrize(("recipe", "config_class", "envs", "cookbook"), COOKBOOK)
def test_dry_runs_of_the_default_and_the_cookbook_preset(
    recipe: str, config_class: type[Any], envs: str, cookbook: dict[str, Any]
) -> None:
    assert envs in dry_run(recipe)
    plan = dry_run(recipe, "--preset", "cookbook")
    assert f"base_model={cookbook['model_name']!r}" in plan
    cfg = resolve_config(recipe, preset="cookbook").config
    assert isinstance(cfg, config_class)
    assert {name: attrgetter(name)(cfg) for name in cookbook} == cookbook
