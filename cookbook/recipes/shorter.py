"""shorter: RL against a rule judge that prefers the shorter reply, as tinker-cookbook's
recipes/preference/shorter. Each prompt is answered `group_size` times, the answers meet in a
pairwise tournament judged by ShorterIsBetter (fewer characters wins), and each answer's reward
is its wins minus losses (minus 1 for a reply without a clean stop): reply length falls.

Locally: SmolLM2-135M-Instruct on the cookbook's prompt ("Who are you?"). `--dataset` takes the
prompts of a comparison dataset instead (bundled:prefs, hhh, ...). `--preset cookbook`:
Qwen3.5-4B through Tinker, 32 groups of 16, LR 3e-5, 64 tokens.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from cookbook.envs.pairwise import PreferenceRLDatasets
from cookbook.envs.shorter import WHO_ARE_YOU, ShorterPrompts
from cookbook.recipes import SMOLLM2_RL
from cookbook.recipes.dataset_splits import resolve_dataset
from kitchen.engine.graph import Workflow
from kitchen.engine.recipe import Recipe
from kitchen.workflows.reinforcement import RLConfig
from kitchen.workflows.reinforcement.state import RLState
from kitchen.workflows.rlhf import preference_rl
from train_core.preference.preference_model import ShorterIsBetter
from train_core.preference.tournament import TournamentPattern
from train_core.rl.types import RLDatasetFactory


class ShorterConfig(RLConfig):
    defaults: ClassVar[dict[str, Any]] = {
        **SMOLLM2_RL,
        "max_tokens": 64,
        "compute_post_kl": True,
    }
    dataset: str = Field(
        "who_are_you",
        description="who_are_you (tinker-cookbook's: 'Who are you?', repeated) | the prompts of a "
        "comparison dataset: bundled:prefs | hhh | helpsteer3 | ultrafeedback | path.jsonl",
    )
    num_prompts: int = Field(
        1024, ge=1, description="who_are_you: how many times the prompt is repeated"
    )
    tournament: TournamentPattern = Field(
        "all_pairs_both_ways",
        description="Pairs judged per group: all_pairs_one_way | all_pairs_both_ways",
    )
    matchup_group_size: int = Field(4, ge=2, description="Tournaments run within chunks this big")


class Shorter(Recipe[ShorterConfig]):
    """RL against a rule judge preferring the shorter reply (pairwise preference envs)."""

    name = "shorter"

    def workflow(self, cfg: ShorterConfig) -> Workflow[RLState]:
        make: RLDatasetFactory
        if cfg.dataset == "who_are_you":
            make = ShorterPrompts(
                [WHO_ARE_YOU], cfg.group_size, cfg.groups_per_batch, cfg.num_prompts,
                cfg.tournament, cfg.matchup_group_size, cfg.seed,
            )  # fmt: skip
        else:
            data = resolve_dataset(cfg.dataset, "comparison")
            make = PreferenceRLDatasets(
                data.source, data.split, data.convert, lambda renderer: ShorterIsBetter(),
                cfg.group_size, cfg.groups_per_batch, pattern=cfg.tournament,
                matchup_group_size=cfg.matchup_group_size, max_tokens=cfg.max_tokens,
                seed=cfg.seed,
            )  # fmt: skip
        return preference_rl(cfg, make, self.name)
