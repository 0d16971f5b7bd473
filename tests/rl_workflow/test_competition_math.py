"""The competition math envs (MATH, MATH-500, DeepMath, Polaris): the hub datasets and splits
tinker-cookbook reads, MATH-500's problems kept out of MATH's training rows, the bundled rows
offline, math-verify grading of boxed LaTeX, and `--env NAME` picking them from the CLI."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from typer.testing import CliRunner

from cookbook.datasets.competition_math import deepmath_row, hendrycks_math_row, polaris_row
from cookbook.envs import RLEnvFields, env_dataset
from cookbook.envs.competition_math import MATH_SETS, CompetitionMathEnvs
from kitchen.adapters.datasets import HFDatasetStore
from kitchen.adapters.fake.tokenizer import FakeTokenizer
from kitchen.app.cli import app
from kitchen.app.resolve import get_recipe, resolve_config
from train_core.renderers import get_renderer
from train_core.rl.types import RLEnvContext


@pytest.fixture
def renderer() -> Any:
    return get_renderer("chatml", FakeTokenizer())


def hendrycks(problem: str, answer: str) -> dict[str, Any]:
    return {"problem": problem, "level": "Level 1", "type": "Algebra",
            "solution": f"So it is $\\boxed{{{answer}}}$."}  # fmt: skip


class HubStore:
    """A dataset store that answers the hub names it is given (any other: one problem named
    after it) and records what was asked."""

    def __init__(self, tables: dict[tuple[str, str], list[dict[str, Any]]]) -> None:
        self.tables, self.asked = tables, []

    def load(self, source: str, split: str = "train") -> list[dict[str, Any]]:
        self.asked.append((source, split))
        return self.tables.get((source, split), [hendrycks(f"{source} {split}", "7")])


def test_math_trains_on_every_subject_less_math500_and_evaluates_on_math500(renderer: Any) -> None:
    tables = {
        ("EleutherAI/hendrycks_math:algebra", "train"): [hendrycks("p1", "1"), hendrycks("held", "2")],
        ("EleutherAI/hendrycks_math:geometry", "test"): [hendrycks("p3", "\\frac{1}{3}")],
        ("HuggingFaceH4/MATH-500", "test"): [hendrycks("held", "2")],
    }  # fmt: skip
    store = HubStore(tables)
    envs = CompetitionMathEnvs("hendrycks_math", groups_per_batch=100, group_size=2)
    train, test = envs(RLEnvContext(renderer, renderer.tokenizer, store))
    configs = ("algebra", "counting_and_probability", "geometry", "intermediate_algebra",
               "number_theory", "prealgebra", "precalculus")  # fmt: skip
    expected = {(f"EleutherAI/hendrycks_math:{c}", s) for c in configs for s in ("train", "test")}
    assert set(store.asked) == expected | {("HuggingFaceH4/MATH-500", "test")}
    problems = {b.env_thunk().problem for b in train.get_batch(0)}
    assert {"p1", "p3"} <= problems and "held" not in problems  # MATH-500's problem held out
    assert len(problems) == 2 + 12  # one each from the 12 other (config, split) pairs
    assert test is not None and [b.env_thunk().answer for b in test.get_batch(0)] == ["2"]


@pytest.mark.parametrize(
    ("name", "hub"),
    [("deepmath", "zwhe99/DeepMath-103K"), ("polaris", "POLARIS-Project/Polaris-Dataset-53K")],
)
def test_deepmath_and_polaris_read_the_cookbooks_hub_datasets(
    renderer: Any, name: str, hub: str
) -> None:
    row = (
        {"question": "q", "final_answer": "\\sqrt{2}"}
        if name == "deepmath"
        else {"problem": "q", "answer": "\\sqrt{2}"}
    )
    store = HubStore({(hub, "train"): [row, {**row, "problem": "", "question": ""}]})
    train, test = CompetitionMathEnvs(name, groups_per_batch=4, group_size=1)(
        RLEnvContext(renderer, renderer.tokenizer, store)
    )
    assert store.asked == [(hub, "train")] and test is None
    [builder] = train.get_batch(0)  # the row without a problem is dropped
    env = builder.env_thunk()
    assert (env.answer, env.convo_prefix) == ("\\sqrt{2}", [])  # no few-shot, as the cookbook


@pytest.mark.parametrize("name", sorted(MATH_SETS))
def test_bundled_rows_load_offline_and_their_answers_grade_correct(
    renderer: Any, name: str
) -> None:
    envs = CompetitionMathEnvs(name, groups_per_batch=100, group_size=1, source="bundled")
    train, test = envs(RLEnvContext(renderer, renderer.tokenizer, HFDatasetStore()))
    builders = train.get_batch(0)
    assert len(builders) >= 4
    assert (test is not None) == (name in ("hendrycks_math", "math500"))
    for builder in builders:
        env = builder.env_thunk()
        assert env.get_question().endswith(" Write your answer in \\boxed{} format.")
        assert env.check_answer(f"Therefore $\\boxed{{{env.answer}}}$.")
        assert not env.check_answer("Therefore $\\boxed{1234567}$.")


def test_math_verify_grades_an_equal_answer_in_another_form(renderer: Any) -> None:
    store = HubStore({("HuggingFaceH4/MATH-500", "test"): [hendrycks("p", "\\frac{3}{8}")]})
    train, _ = CompetitionMathEnvs("math500", groups_per_batch=1, group_size=1)(
        RLEnvContext(renderer, renderer.tokenizer, store)
    )
    env = train.get_batch(0)[0].env_thunk()
    tokens = [*renderer.tokenizer.encode("It is \\boxed{0.375}"), renderer.tokenizer.eos_token_id]
    asyncio.run(env.initial_observation())
    assert asyncio.run(env.step(tokens)).metrics["correct"] == 1.0


def test_rows_without_an_answer_are_dropped() -> None:
    assert hendrycks_math_row({"problem": "p", "solution": "no box"}) is None
    assert deepmath_row({"question": "q", "final_answer": ""}) is None
    assert polaris_row({"problem": "", "answer": "3"}) is None
    assert hendrycks_math_row(hendrycks("p", "(1,2)")) == {"question": "p", "answer": "(1,2)",
                                                           "solution": "So it is $\\boxed{(1,2)}$."}  # fmt: skip


def test_the_grader_defaults_to_math_verify_for_competition_envs_only() -> None:
    competition = env_dataset(RLEnvFields(env="math500"), 4, 2, None, 0)
    gsm8k = env_dataset(RLEnvFields(env="gsm8k"), 4, 2, None, 0)
    assert (competition.grader, gsm8k.grader) == ("math_verify", "numeric")  # type: ignore[union-attr]
    chosen = env_dataset(RLEnvFields(env="math", math_grader="math_verify"), 4, 2, None, 0)
    assert chosen.grader == "math_verify"  # type: ignore[union-attr]


@pytest.mark.parametrize("name", sorted(MATH_SETS))
def test_kitchen_run_math_rl_picks_the_env(name: str) -> None:
    result = CliRunner().invoke(
        app, ["run", "math_rl", "--env", name, "--dry-run"], terminal_width=300
    )
    assert result.exit_code == 0, result.output
    assert f"CompetitionMathEnvs(name='{name}'" in result.output


def test_the_cookbook_math_preset_holds_the_readme_run() -> None:
    cfg = resolve_config(get_recipe("math_rl"), preset="cookbook_math").config
    assert (cfg.env, cfg.math_source, cfg.model_name) == (
        "hendrycks_math",
        "hub",
        "Qwen/Qwen3.5-9B",
    )
    assert (cfg.group_size, cfg.groups_per_batch, cfg.max_tokens) == (16, 64, 512)
    assert (cfg.optimizer.learning_rate, cfg.loss_fn) == (2e-5, "importance_sampling")
