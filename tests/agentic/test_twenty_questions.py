"""twenty_questions: the game's rules with a scripted answerer, the answerer's view, the word
split, and the recipe's runs (the answerer a second sampling client on the tiny model)."""

from __future__ import annotations

import asyncio

import pytest

from cookbook.envs.twenty_questions import (
    ScriptedAnswerer,
    TwentyQuestionsEnv,
    TwentyQuestionsEnvs,
    load_words,
    split_words,
)
from cookbook.recipes.twenty_questions import TwentyQuestionsConfig
from kitchen.adapters.fake.tokenizer import FakeTokenizer
from tests.agentic.helpers import two_steps
from train_core.renderers import get_renderer
from train_core.rl.types import RLEnvContext


def ask(env: TwentyQuestionsEnv, text: str):
    return asyncio.run(env.step({"role": "assistant", "content": text}))


def test_questions_get_the_answerers_reply_and_a_right_guess_wins():
    answerer = ScriptedAnswerer()
    env = TwentyQuestionsEnv("violin", answerer)
    opening = asyncio.run(env.initial_observation())
    assert opening[0]["role"] == "system" and "Guess: <word>" in opening[0]["content"]
    no = ask(env, "Is it an animal?")
    assert (no.reward, no.episode_done, no.next_messages[-1]) == (0.0, False, {"role": "user", "content": "no"})  # fmt: skip
    yes = ask(env, "Is it a violin?")
    assert yes.next_messages[-1]["content"] == "yes"
    wrong = ask(env, "Guess: cello")
    assert (wrong.reward, wrong.episode_done, wrong.metrics["guessed"]) == (0.0, False, 1.0)
    win = ask(env, "Guess: Violin")
    assert (win.reward, win.episode_done, win.metrics["questions"]) == (1.0, True, 4.0)


def test_the_answerer_sees_only_its_secret_and_the_last_question():
    answerer = ScriptedAnswerer()
    env = TwentyQuestionsEnv("kite", answerer)
    asyncio.run(env.initial_observation())
    ask(env, "Does it fly?")
    ask(env, "Is it made of paper?")
    last = answerer.seen[-1]
    assert [m["role"] for m in last] == ["system", "user"]
    assert "kite" in last[0]["content"] and last[1]["content"] == "Is it made of paper?"


def test_the_game_ends_after_twenty_questions_without_reward():
    env = TwentyQuestionsEnv("kite", ScriptedAnswerer())
    asyncio.run(env.initial_observation())
    results = [ask(env, f"Is it thing {i}?") for i in range(20)]
    assert [r.episode_done for r in results] == [False] * 19 + [True]
    assert sum(r.reward for r in results) == 0.0


def test_a_guess_counts_only_at_the_start_of_the_reply():
    env = TwentyQuestionsEnv("kite", ScriptedAnswerer())
    asyncio.run(env.initial_observation())
    assert ask(env, "I think. Guess: kite").reward == 0.0


def test_words_split_into_train_and_a_disjoint_test_fifth():
    words = load_words()
    train, test = split_words(words)
    assert len(test) == len(words) // 5 and not set(train) & set(test)
    renderer = get_renderer("chatml", FakeTokenizer())
    envs = TwentyQuestionsEnvs(4, 2, lambda b, r: ScriptedAnswerer(), num_epochs=2, test_words=5)
    train_set, test_set = envs(RLEnvContext(renderer, renderer.tokenizer))
    assert len(train_set) == 2 * len(train) // 4 and len(test_set.get_batch(0)) == 5


@pytest.mark.slow
@pytest.mark.parametrize("answerer", ["model", "scripted"])
def test_two_steps_on_the_tiny_model(tmp_path, answerer):
    two_steps("twenty_questions", tmp_path, max_tokens=6, answerer=answerer)


def test_the_model_answerer_is_a_sampling_client_on_the_answerers_base_model():
    from cookbook.recipes.twenty_questions import open_answerer
    from kitchen.adapters.fake.backend import FakeBackend

    renderer = get_renderer("chatml", FakeTokenizer())
    backend = FakeBackend(responder=lambda prompt: "yes")
    cfg = TwentyQuestionsConfig.model_validate({"answerer": "model"})
    answerer = open_answerer(cfg, backend, renderer)
    env = TwentyQuestionsEnv("kite", answerer)
    asyncio.run(env.initial_observation())
    assert ask(env, "Does it fly?").next_messages[-1] == {"role": "user", "content": "yes"}
    assert "create_sampling_client" in backend.calls
