"""The `shorter` preference env, as tinker-cookbook's recipes/preference/shorter: the pairwise
preference envs (cookbook.envs.pairwise) judged by a rule, ShorterIsBetter (the reply with fewer
characters wins a matchup; equal lengths tie), so RL against it shortens replies. Prompts are the
cookbook's single prompt repeated, or the prompts of a comparison dataset."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cookbook.envs.pairwise import PairwisePreferenceDataset, PairwisePreferenceGroupBuilder
from train_core.preference.preference_model import ShorterIsBetter
from train_core.preference.tournament import TournamentPattern
from train_core.renderers.types import Message
from train_core.rl.types import RLEnvContext

WHO_ARE_YOU: list[Message] = [{"role": "user", "content": "Who are you?"}]
"""tinker-cookbook's shorter prompt; its dataset is this one prompt 1024 times."""


@dataclass(frozen=True)
class ShorterPrompts:
    """RLDatasetFactory: `prompts` (each `repeat` times) in groups judged by ShorterIsBetter; no
    test set (the cookbook's has none)."""

    prompts: Sequence[list[Message]]
    group_size: int
    groups_per_batch: int
    repeat: int = 1
    pattern: TournamentPattern = "all_pairs_both_ways"
    matchup_group_size: int = 4
    seed: int = 0

    def __call__(self, ctx: RLEnvContext) -> tuple[PairwisePreferenceDataset, None]:
        judge = ShorterIsBetter()

        def builder(prompt: list[Message]) -> PairwisePreferenceGroupBuilder:
            return PairwisePreferenceGroupBuilder(
                prompt, ctx.renderer, judge, self.group_size, self.pattern, self.matchup_group_size
            )

        prompts = [list(p) for p in self.prompts for _ in range(self.repeat)]
        return PairwisePreferenceDataset(prompts, self.groups_per_batch, self.seed, builder), None
