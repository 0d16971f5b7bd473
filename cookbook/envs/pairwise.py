"""Pairwise-preference RL environments (tinker-cookbook's rl/preference_envs): the policy answers a
prompt `group_size` times, a preference model judges the answers against each other in a
tournament, and each answer's reward is its wins minus losses (train_core.preference.tournament).

The held-out set is a ReferenceSet: each test prompt with the reference policy's greedy answer in
slot A (the SFT policy in rlhf_pair_pref), scored by train_core's ComparisonEvaluator (win rate).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cookbook.envs.problem_rows import ItemBatches
from cookbook.envs.unscored import UnscoredEnv
from kitchen.engine.errors import DataError
from train_core.completers import TinkerMessageCompleter, termination_flags
from train_core.preference import Comparison
from train_core.preference.preference_model import PreferenceModel, decided
from train_core.preference.tournament import (
    TournamentPattern,
    get_pairs_chunked,
    pairwise_group_rewards,
)
from train_core.renderers.types import Message
from train_core.rl.types import (
    Env,
    EnvGroupBuilder,
    Metrics,
    RLEnvContext,
    Trajectory,
)


@dataclass(frozen=True)
class PairwisePreferenceGroupBuilder(EnvGroupBuilder):
    """`num_envs` answers to one prompt, rewarded by `preference_model` over the tournament
        `pattern` within chunks of `matchup_group_size`. A response not ended by the renderer's stop
        sequence loses `format_coef` (metric `format`). With `decisions` each matchup counts as the
    judge's decision (a win or a loss, as tinker-cookbook's greedy judge), not its probability: a
    judge unsure by a few percent still gives rewards of size 1, not a few hundredths."""

    convo_prefix: list[Message]
    renderer: Any
    preference_model: PreferenceModel
    num_envs: int
    pattern: TournamentPattern = "all_pairs_one_way"
    matchup_group_size: int = 4
    format_coef: float = 1.0
    decisions: bool = True

    async def make_envs(self) -> Sequence[Env]:
        # the reward comes from the group's tournament, so a step gives 0
        return [UnscoredEnv(self.convo_prefix, self.renderer) for _ in range(self.num_envs)]

    def response(self, trajectory: Trajectory) -> tuple[list[Message], bool]:
        message, termination = self.renderer.parse_response(
            list(trajectory.transitions[0].ac.tokens)
        )
        return [{"role": "assistant", "content": message["content"]}], termination_flags(
            termination
        )[1]

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        answers_G, valid_G = zip(*(self.response(t) for t in trajectory_group), strict=True)
        pairs_M = get_pairs_chunked(len(answers_G), self.pattern, self.matchup_group_size)
        judged_M = await asyncio.gather(
            *(self.preference_model(Comparison(self.convo_prefix, answers_G[i], answers_G[j]))
              for i, j in pairs_M)
        )  # fmt: skip
        if self.decisions:
            judged_M = [decided(p) for p in judged_M]
        rewards_G, wml_G = pairwise_group_rewards(
            len(answers_G), pairs_M, judged_M, valid_G, self.format_coef
        )
        return [
            (float(r), {"win_minus_loss": float(w), "format": float(v)})
            for r, w, v in zip(rewards_G, wml_G, valid_G, strict=True)
        ]

    def logging_tags(self) -> list[str]:
        return ["pair_pref"]


class PairwisePreferenceDataset(ItemBatches[list[Message]]):
    """Whole batches of `groups_per_batch` prompts, shuffled once with `seed`."""

    def __init__(self, prompts: Sequence[list[Message]], groups_per_batch: int, seed: int,
                 make_builder: Callable[[list[Message]], EnvGroupBuilder]) -> None:  # fmt: skip
        order = list(range(len(prompts)))
        random.Random(seed).shuffle(order)
        shuffled = [prompts[i] for i in order]
        super().__init__(shuffled, groups_per_batch, make_builder, whole_batches=True)


@dataclass
class ReferenceComparisons:
    """A ReferenceSet: test prompts with the reference policy's answer as completion_A."""

    comparisons: list[Comparison]
    judge: PreferenceModel
    renderer: Any


def unique_prompts(rows: Sequence[dict[str, Any]], limit: int | None = None) -> list[list[Message]]:
    """Each comparison row's prompt conversation once, in order of first appearance."""
    seen: set[str] = set()
    out: list[list[Message]] = []
    for row in rows:
        key = repr(row["prompt_conversation"])
        if key not in seen:
            seen.add(key)
            out.append(row["prompt_conversation"])
    return out[:limit]


async def reference_comparisons(
    prompts: Sequence[list[Message]], reference: Any, renderer: Any, max_tokens: int
) -> list[Comparison]:
    """The reference policy's greedy answer to each prompt, as completion_A (B is filled later)."""
    policy = TinkerMessageCompleter(reference, renderer, max_tokens, temperature=0.0)
    answers = await asyncio.gather(*(policy(p) for p in prompts))
    return [Comparison(list(p), [a], []) for p, a in zip(prompts, answers, strict=True)]


@dataclass(frozen=True)
class PreferenceRLDatasets:
    """RLDatasetFactory over comparison rows (their prompts only): train groups judged by
    `make_judge(renderer)`; a test ReferenceSet answered by `open_reference()` when given."""

    source: str
    split: str
    convert: Any
    make_judge: Callable[[Any], PreferenceModel]
    group_size: int
    groups_per_batch: int
    test_source: str | None = None
    test_split: str = "test"
    open_reference: Callable[[], Any] | None = field(default=None, repr=False)
    pattern: TournamentPattern = "all_pairs_one_way"
    matchup_group_size: int = 4
    max_tokens: int = 64
    decisions: bool = True
    max_test_prompts: int | None = 32
    seed: int = 0

    def _prompts(self, store: Any, source: str, split: str, limit: int | None = None) -> list[list[Message]]:  # fmt: skip
        if store is None:
            raise DataError(f"preference prompts {source}: no dataset store configured")
        rows = store.load(source, split)
        where = getattr(rows, "where", lambda i: f"{source} ({split}) row {i}")
        converted = [c for i, r in enumerate(rows) if (c := self.convert(r, where(i))) is not None]
        prompts = unique_prompts(converted, limit)
        if not prompts:
            raise DataError(f"preference prompts {source} ({split}) has no rows")
        return prompts

    async def __call__(self, ctx: RLEnvContext) -> tuple[PairwisePreferenceDataset, ReferenceComparisons | None]:  # fmt: skip
        judge = self.make_judge(ctx.renderer)

        def builder(prompt: list[Message]) -> PairwisePreferenceGroupBuilder:
            return PairwisePreferenceGroupBuilder(
                prompt, ctx.renderer, judge, self.group_size, self.pattern,
                self.matchup_group_size, decisions=self.decisions,
            )  # fmt: skip

        train = PairwisePreferenceDataset(
            self._prompts(ctx.datasets, self.source, self.split), self.groups_per_batch, self.seed, builder
        )  # fmt: skip
        if self.test_source is None or self.open_reference is None:
            return train, None
        prompts = self._prompts(
            ctx.datasets, self.test_source, self.test_split, self.max_test_prompts
        )
        comparisons = await reference_comparisons(
            prompts, self.open_reference(), ctx.renderer, self.max_tokens
        )
        return train, ReferenceComparisons(comparisons, judge, ctx.renderer)
