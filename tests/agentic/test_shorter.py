"""shorter: the rule judge on the pairwise preference envs ranks a group's replies by length,
and the recipe dry-runs and trains."""

from __future__ import annotations

import asyncio

import pytest

from cookbook.envs.shorter import WHO_ARE_YOU, ShorterPrompts
from kitchen.adapters.fake.tokenizer import FakeTokenizer
from tests.agentic.helpers import dry_run, two_steps
from train_core.completers import TokensWithLogprobs
from train_core.renderers import get_renderer
from train_core.rl import do_group_rollout
from train_core.rl.types import RLEnvContext

TOKENIZER = FakeTokenizer()
RENDERER = get_renderer("chatml", TOKENIZER)
REPLIES = ["I am a large language model trained to help.", "An assistant.", "AI.", "I help."]


class Scripted:
    """Each env of the group answers the next reply of REPLIES, cleanly stopped."""

    def __init__(self) -> None:
        self.n = 0

    async def __call__(self, model_input, stop, *, max_tokens=None):  # type: ignore[no-untyped-def]
        text, self.n = REPLIES[self.n % len(REPLIES)], self.n + 1
        tokens = TOKENIZER.encode(text + "<|im_end|>")
        return TokensWithLogprobs(tokens, [-0.1] * len(tokens))


def test_the_shorter_reply_wins_every_matchup_and_the_longest_loses_every_one():
    make = ShorterPrompts([WHO_ARE_YOU], group_size=4, groups_per_batch=1, repeat=3)
    train, test = make(RLEnvContext(RENDERER, TOKENIZER))
    assert test is None and len(train) == 3
    builder = train.get_batch(0)[0]
    group = asyncio.run(do_group_rollout(builder, Scripted()))  # type: ignore[arg-type]
    rewards = group.get_total_rewards()
    by_length = sorted(range(4), key=lambda i: len(REPLIES[i]))
    assert [rewards[i] for i in by_length] == sorted(rewards, reverse=True)
    assert rewards[2] == pytest.approx(1.0) and rewards[0] == pytest.approx(-1.0)


def test_a_comparison_dataset_dry_runs_as_preference_prompts():
    assert "PreferenceRLDatasets" in dry_run("shorter", "--dataset", "bundled:prefs")


@pytest.mark.slow
def test_two_steps_on_the_tiny_model(tmp_path):
    train = two_steps("shorter", tmp_path, max_tokens=6, num_prompts=4)
    assert all("env/all/win_minus_loss" in r for r in train)
