"""guess_number: the cookbook's rules beside the small default, and the recipe's runs."""

from __future__ import annotations

import asyncio

import pytest

from cookbook.envs.guess_number import GuessNumberEnv
from cookbook.recipes.guess_number import GuessNumberConfig
from kitchen.app.resolve import resolve_config
from tests.agentic.helpers import two_steps


def say(env: GuessNumberEnv, text: str):
    return asyncio.run(env.step({"role": "assistant", "content": text}))


def test_the_cookbook_rules_read_only_guess_colon_and_charge_the_format_penalty():
    env = GuessNumberEnv(secret=700, low=0, high=1024, max_turns=10, rules="cookbook")
    opening = asyncio.run(env.initial_observation())
    assert opening[0]["role"] == "system" and "between 0 and 1024" in opening[0]["content"]
    bare = say(env, "512")
    assert (bare.reward, bare.episode_done, bare.metrics["format"]) == (-1.0, False, 0.0)
    assert bare.next_messages[-1]["content"].startswith("Failed to parse.")
    low = say(env, "Guess: 512")
    assert (low.reward, low.next_messages[-1]["content"]) == (0.0, "Too low")
    assert say(env, "Guess: 800").next_messages[-1]["content"] == "Too high"
    assert say(env, "I think Guess: 700").reward == -1.0  # the format anchors at the start
    win = say(env, "Guess: 700")
    assert (win.reward, win.episode_done, win.next_messages[-1]["content"]) == (
        1.0,
        True,
        "Correct",
    )


def test_the_cookbook_game_ends_after_ten_guesses():
    env = GuessNumberEnv(secret=3, low=0, high=1024, max_turns=10, rules="cookbook")
    asyncio.run(env.initial_observation())
    results = [say(env, f"Guess: {n}") for n in range(100, 110)]
    assert [r.episode_done for r in results] == [False] * 9 + [True]
    assert sum(r.reward for r in results) == 0.0


def test_the_default_stays_the_small_game():
    env = GuessNumberEnv(secret=5)
    assert "from 1 to 16" in asyncio.run(env.initial_observation())[0]["content"]
    assert say(env, "Guess: 9").next_messages[-1]["content"] == "Lower."


def test_the_recipes_default_config_is_the_small_game_with_hints():
    small = resolve_config("guess_number").config
    assert isinstance(small, GuessNumberConfig)
    assert (small.rules, small.guess_high, small.guess_max_turns) == ("hint", 16, 5)


@pytest.mark.slow
def test_two_steps_on_the_tiny_model(tmp_path):
    two_steps("guess_number", tmp_path, max_tokens=4, rules="cookbook", num_test_problems=0)
    rollouts = (tmp_path / "rollouts" / "iter_000001.jsonl").read_text()
    assert "Guess: <guess>" in rollouts and "between 1 and 16" in rollouts
