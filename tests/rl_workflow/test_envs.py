"""The cookbook envs: arithmetic grading, \\boxed{} answer grading, the GSM8K loader on local
files in its shape, and guess-the-number transitions."""

from __future__ import annotations

import asyncio
import json
from functools import partial

import pytest

from cookbook.envs.arithmetic import ArithmeticEnv, ArithmeticEnvs, extract_final_int
from cookbook.envs.guess_number import GuessNumberEnv, GuessNumberEnvs
from cookbook.envs.math import MathEnv, MathEnvs
from cookbook.envs.math_grading import extract_boxed, grade_answer, normalize_answer
from cookbook.envs.message_group import MessageEnvGroupBuilder
from kitchen.adapters.datasets import HFDatasetStore
from kitchen.adapters.fake.tokenizer import FakeTokenizer
from train_core.renderers import get_renderer
from train_core.rl.types import RLEnvContext


@pytest.fixture
def renderer():
    return get_renderer("chatml", FakeTokenizer())


def respond(renderer, text: str, stop: bool = True) -> list[int]:
    tokens = renderer.tokenizer.encode(text)
    return [*tokens, renderer.tokenizer.eos_token_id] if stop else tokens


def test_extract_final_int_takes_the_last_integer():
    assert extract_final_int("23 + 58 = 81") == 81
    assert extract_final_int("The answer is 1,234.") == 1234
    assert extract_final_int("minus: -7") == -7
    assert extract_final_int("no digits") is None


def test_arithmetic_env_rewards_the_sum_and_penalises_a_missing_stop(renderer):
    env = ArithmeticEnv(23, 58, renderer)
    assert env.get_question() == "What is 23 + 58?"
    right = asyncio.run(env.step(respond(renderer, "It is 81")))
    assert right.reward == 1.0 and right.metrics == {"format": 1.0, "correct": 1.0}
    wrong = asyncio.run(env.step(respond(renderer, "80")))
    assert wrong.reward == 0.0 and wrong.metrics["correct"] == 0.0
    cut = asyncio.run(env.step(respond(renderer, "81", stop=False)))
    assert cut.reward == pytest.approx(0.9)  # correct, but no stop sequence: format_coef lost


def test_arithmetic_batches_are_deterministic_and_bounded_by_the_difficulty(renderer):
    envs = ArithmeticEnvs(groups_per_batch=16, group_size=3, n_batches=5, max_operand=9)
    train, test = envs(RLEnvContext(renderer, renderer.tokenizer))
    assert len(train) == 5 and len(test) == 1
    batch = train.get_batch(2)
    assert len(batch) == 16 and all(b.num_envs == 3 for b in batch)
    problems = [(b.env_thunk().x, b.env_thunk().y) for b in batch]
    assert problems == [(b.env_thunk().x, b.env_thunk().y) for b in train.get_batch(2)]
    assert all(0 <= x <= 9 and 0 <= y <= 9 for x, y in problems)
    assert problems != [(b.env_thunk().x, b.env_thunk().y) for b in train.get_batch(3)]
    assert all(b.num_envs == 1 for b in test.get_batch(0))


@pytest.mark.parametrize(
    ("text", "boxed"),
    [
        ("so \\boxed{42}.", "42"),
        ("first \\boxed{1} then \\boxed{2}", "2"),
        ("nested \\boxed{\\frac{3}{4}}", "\\frac{3}{4}"),
        ("spaced \\boxed {7}", "7"),
        ("bare \\boxed 12 done", "12"),
        ("framed \\fbox{9}", "9"),
        ("unclosed \\boxed{3 and \\boxed{5}", "5"),
    ],
)
def test_extract_boxed_finds_the_last_box(text, boxed):
    assert extract_boxed(text) == boxed


@pytest.mark.parametrize("text", ["no box here", "\\boxed{unclosed", ""])
def test_extract_boxed_raises_without_a_box(text):
    with pytest.raises(ValueError):
        extract_boxed(text)


@pytest.mark.parametrize(
    ("given", "reference"),
    [
        ("18", "18"),
        ("18.00", "18"),
        ("1,234", "1234"),
        ("\\$1,234.50", "1234.5"),
        ("50\\%", "50"),
        ("x = 5", "5"),
        ("18 eggs", "18"),
        ("\\text{18 dollars}", "18"),
        ("\\frac{3}{4}", "0.75"),
        ("\\dfrac{3}{4}", "3/4"),
        ("-7", "-7"),
        ("$12$", "12"),
        ("12.", "12"),
        ("Paris", "paris"),
    ],
)
def test_grade_answer_accepts_equal_values(given, reference):
    assert grade_answer(given, reference)


@pytest.mark.parametrize(
    ("given", "reference"),
    [
        ("17", "18"),
        ("18 or 20", "18"),
        ("", "18"),
        ("eighteen", "18"),
        ("1.8", "18"),
        ("-18", "18"),
        ("3/0", "3"),
        ("London", "Paris"),
    ],
)
def test_grade_answer_rejects_different_values(given, reference):
    assert not grade_answer(given, reference)


def test_normalize_answer_strips_formatting():
    assert normalize_answer(" $\\text{1,000,000}$ ") == "1000000"


def test_math_env_needs_a_box_for_format_and_the_right_value(renderer):
    env = MathEnv("Tom has 3 apples and buys 4. How many?", "7", renderer)
    assert env.get_question().endswith("written inside \\boxed{}.")
    right = asyncio.run(env.step(respond(renderer, "3 + 4 = 7, so \\boxed{7}")))
    assert right.metrics == {"format": 1.0, "correct": 1.0} and right.reward == 1.0
    unboxed = asyncio.run(env.step(respond(renderer, "7")))
    assert unboxed.metrics == {"format": 0.0, "correct": 0.0}
    assert unboxed.reward == pytest.approx(-0.1)


def test_math_envs_load_gsm8k_shaped_local_files(renderer, tmp_path):
    rows = [
        {
            "question": f"What is {i} doubled?",
            "answer": f"{i} * 2 = <<{i}*2={2 * i}>>{2 * i}\n#### {2 * i:,}",
        }
        for i in range(500, 510)
    ]
    folder = tmp_path / "gsm"
    folder.mkdir()
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
    envs = MathEnvs(str(folder), groups_per_batch=4, group_size=2, test_problems=2)
    train, test = envs(RLEnvContext(renderer, renderer.tokenizer, HFDatasetStore()))
    assert len(train) == 3  # ceil(10 / 4)
    answers = sorted(int(b.env_thunk().answer) for i in range(3) for b in train.get_batch(i))
    assert answers == [2 * i for i in range(500, 510)]  # "1,000" read as 1000, every row once
    assert len(test.get_batch(0)) == 2 and test.get_batch(0)[0].num_envs == 1


def test_math_envs_read_the_bundled_set(renderer):
    envs = MathEnvs("bundled:math", groups_per_batch=8, group_size=2, test_problems=4)
    train, test = envs(RLEnvContext(renderer, renderer.tokenizer, HFDatasetStore()))
    assert len(train) == 50 and len(test.get_batch(0)) == 4
    assert train.get_batch(0)[0].logging_tags() == ["math"]


def test_guess_number_hints_then_rewards_a_correct_guess():
    env = GuessNumberEnv(secret=11, high=16, max_turns=4)
    opening = asyncio.run(env.initial_observation())
    assert "from 1 to 16" in opening[0]["content"]
    low = asyncio.run(env.step({"role": "assistant", "content": "8"}))
    assert (low.reward, low.episode_done) == (0.0, False)
    assert low.next_messages[-1] == {"role": "user", "content": "Higher."}
    high = asyncio.run(env.step({"role": "assistant", "content": "I guess 13"}))
    assert high.next_messages[-1]["content"] == "Lower." and not high.episode_done
    junk = asyncio.run(env.step({"role": "assistant", "content": "hmm"}))
    assert "just a number" in junk.next_messages[-1]["content"]
    win = asyncio.run(env.step({"role": "assistant", "content": "11"}))
    assert (win.reward, win.episode_done) == (1.0, True)
    assert win.metrics == {"correct": 1.0, "turns": 4.0}


def test_guess_number_ends_after_max_turns_without_reward():
    env = GuessNumberEnv(secret=3, high=16, max_turns=2)
    asyncio.run(env.initial_observation())
    first = asyncio.run(env.step({"role": "assistant", "content": "9"}))
    last = asyncio.run(env.step({"role": "assistant", "content": "5"}))
    assert not first.episode_done and last.episode_done and last.reward == 0.0
    assert last.metrics["correct"] == 0.0


def test_guess_number_token_env_runs_a_multi_turn_episode(renderer):
    from train_core.rl import do_group_rollout

    class Guesser:
        """Guesses 1, 2, 3, ... whatever the hint."""

        def __init__(self) -> None:
            self.turn = 0

        async def __call__(self, model_input, stop, *, max_tokens=None):
            from train_core.completers import TokensWithLogprobs

            self.turn += 1
            tokens = respond(renderer, str(self.turn))
            return TokensWithLogprobs(tokens, [-0.1] * len(tokens))

    builder = MessageEnvGroupBuilder(partial(GuessNumberEnv, 3, max_turns=5), renderer, 1, "guess")
    group = asyncio.run(do_group_rollout(builder, Guesser()))
    traj = group.trajectories_G[0]
    assert len(traj.transitions) == 3 and group.get_total_rewards() == [1.0]
    # the third prompt carries the whole conversation, hints included
    third_prompt = renderer.tokenizer.decode(traj.transitions[2].ob.to_ints())
    assert third_prompt.count("Higher.") == 2


def test_guess_number_envs_build_groups_of_one_secret(renderer):
    train, test = GuessNumberEnvs(groups_per_batch=3, group_size=4, n_batches=2, high=8)(
        RLEnvContext(renderer, renderer.tokenizer)
    )
    batch = train.get_batch(0)
    assert len(batch) == 3 and all(
        1 <= b.env_thunk().secret <= 8 and b.num_envs == 4 for b in batch
    )
    assert len(asyncio.run(batch[0].make_envs())) == 4 and len(test.get_batch(0)) == 32
