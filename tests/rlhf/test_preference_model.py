"""The generative judge reads P(A) from its sampler's logprobs of the two answers; the
preference env rewards a group by its tournament; held-out judge accuracy."""

from __future__ import annotations

import asyncio
import math

import pytest
from tinker import types

from cookbook.envs.pairwise import PairwisePreferenceGroupBuilder
from kitchen.adapters.fake.tokenizer import FakeTokenizer
from train_core.completers import TokensWithLogprobs
from train_core.preference import Comparison, LabeledComparison
from train_core.preference.judge_accuracy import judge_accuracy, judge_accuracy_metrics
from train_core.preference.preference_model import (
    GenerativePreferenceModel,
    ShorterIsBetter,
    answer_inputs,
    judge_example,
    prob_first,
)
from train_core.renderers import get_renderer
from train_core.rl.types import Trajectory, Transition

TOKENIZER = FakeTokenizer()
RENDERER = get_renderer("role_colon", TOKENIZER)


def says(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


COMPARISON = Comparison([{"role": "user", "content": "hi"}], says("hello there"), says("go away"))


class AnswerSampler:
    """compute_logprobs: the last token gets logp_A if it decodes to A, else logp_B."""

    def __init__(self, logp_a: float, logp_b: float) -> None:
        self.logp = {"A": logp_a, "B": logp_b}
        self.prompts: list[list[int]] = []

    def compute_logprobs(self, prompt: types.ModelInput):
        tokens = prompt.to_ints()
        self.prompts.append(tokens)
        return self._done(
            [None, *([-1.0] * (len(tokens) - 2)), self.logp[TOKENIZER.decode(tokens[-1:])]]
        )

    async def _done(self, value):
        return value


def test_the_judge_is_read_from_its_own_sampler_as_a_softmax_over_a_and_b():
    sampler = AnswerSampler(math.log(0.6), math.log(0.2))
    p_a = asyncio.run(GenerativePreferenceModel(sampler, RENDERER)(COMPARISON))
    assert p_a == pytest.approx(0.75)
    assert len(sampler.prompts) == 2  # one forward per answer
    assert prob_first(0.0, 0.0) == 0.5 and prob_first(0.0, 1e6) == 0.0


def test_answer_inputs_are_the_judge_prompt_plus_the_training_example_up_to_the_answer():
    input_a, input_b = answer_inputs(RENDERER, COMPARISON)
    text = TOKENIZER.decode(input_a.to_ints())
    assert "==== Completion A ====" in text and "hello there" in text and "go away" in text
    assert text.endswith("A") and TOKENIZER.decode(input_b.to_ints()).endswith("B")
    trained, _ = RENDERER.build_supervised_example(
        judge_example(LabeledComparison(COMPARISON, "A"))
    )
    assert trained.to_ints()[: input_a.length] == input_a.to_ints()


def test_shorter_is_better():
    judge = ShorterIsBetter()
    assert asyncio.run(judge(COMPARISON)) == 1.0 * (len("hello there") < len("go away"))
    assert asyncio.run(judge(COMPARISON.swap())) == 1.0
    assert asyncio.run(judge(Comparison([], says("ab"), says("cd")))) == 0.5


def trajectory(text: str, stop: bool = True) -> Trajectory:
    tokens = TOKENIZER.encode(text + ("\n\nUser:" if stop else ""))  # role_colon's stop string
    ac = TokensWithLogprobs(tokens=tokens, maybe_logprobs=[0.0] * len(tokens))
    step = Transition(ob=types.ModelInput.empty(), ac=ac, reward=0.0, episode_done=True)
    return Trajectory(transitions=[step], final_ob=types.ModelInput.empty())


class CountingJudge(ShorterIsBetter):
    def __init__(self) -> None:
        object.__setattr__(self, "calls", 0)

    async def __call__(self, comparison):
        object.__setattr__(self, "calls", self.calls + 1)
        return await super().__call__(comparison)


@pytest.mark.parametrize(
    "pattern,matchups", [("all_pairs_one_way", 6), ("all_pairs_both_ways", 12)]
)
def test_group_rewards_rank_answers_by_the_judge(pattern, matchups):
    judge = CountingJudge()
    builder = PairwisePreferenceGroupBuilder(
        [{"role": "user", "content": "q"}], RENDERER, judge, 4, pattern
    )
    group = [trajectory(t) for t in ("a much longer answer", "mid one", "x", "medium answer")]
    rewards = [r for r, _ in asyncio.run(builder.compute_group_rewards(group, []))]
    assert judge.calls == matchups
    assert rewards[2] == pytest.approx(1.0) and rewards[0] == pytest.approx(-1.0)
    assert rewards[2] > rewards[1] > rewards[3] > rewards[0]


def test_an_answer_cut_by_max_tokens_loses_the_format_point():
    builder = PairwisePreferenceGroupBuilder(
        [{"role": "user", "content": "q"}], RENDERER, ShorterIsBetter(), 2
    )
    out = asyncio.run(
        builder.compute_group_rewards([trajectory("ab", stop=False), trajectory("cd")], [])
    )
    assert [m["format"] for _, m in out] == [0.0, 1.0]
    assert [r for r, _ in out] == [-1.0, 0.0]


def test_judge_accuracy_counts_agreement_with_the_label():
    metrics = judge_accuracy_metrics([0.9, 0.4, 0.2, 0.7], ["A", "A", "B", "B"])
    assert metrics["test/pairwise_accuracy"] == 0.5
    assert metrics["test/prob_correct"] == pytest.approx((0.9 + 0.4 + 0.8 + 0.3) / 4)
    labeled = [LabeledComparison(COMPARISON, "B"), LabeledComparison(COMPARISON, "Tie")]
    assert asyncio.run(judge_accuracy(ShorterIsBetter(), labeled))["test/num_pairs"] == 1.0


def test_asking_both_ways_cancels_a_judges_position_bias():
    class FirstSlotLover:
        """Prefers slot A by 0.3, plus a little for the shorter completion."""

        async def __call__(self, comparison):
            return 0.8 if await ShorterIsBetter()(comparison) == 1.0 else 0.6

    short_first = LabeledComparison(COMPARISON.swap(), "A")  # "go away" in slot A is the shorter
    long_first = LabeledComparison(COMPARISON, "B")
    metrics = asyncio.run(
        judge_accuracy(FirstSlotLover(), [short_first, long_first], both_orders=True)
    )
    assert metrics["test/pairwise_accuracy"] == 0.5  # says A to both
    assert metrics["test/both_orders/pairwise_accuracy"] == 1.0
    assert metrics["test/both_orders/prob_correct"] == pytest.approx((0.8 + 1 - 0.6) / 2)


class UnsureJudge:
    """Prefers the shorter answer, by a few percent only."""

    async def __call__(self, comparison):
        return 0.5 + 0.04 * (await ShorterIsBetter()(comparison) - 0.5) * 2


@pytest.mark.parametrize("decisions,expected", [(True, [1.0, -1.0]), (False, [0.08, -0.08])])
def test_rewards_count_the_judges_decisions_or_its_probabilities(decisions, expected):
    """As tinker-cookbook's greedy judge, a decision is worth a whole win however unsure the
    judge; from probabilities the same judge gives rewards of a few hundredths."""
    builder = PairwisePreferenceGroupBuilder(
        [{"role": "user", "content": "q"}], RENDERER, UnsureJudge(), 2, decisions=decisions
    )
    out = asyncio.run(builder.compute_group_rewards([trajectory("x"), trajectory("long one")], []))
    assert [r for r, _ in out] == pytest.approx(expected)
