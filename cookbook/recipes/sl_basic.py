"""sl_basic: LoRA fine-tune of a chat model on conversations, as tinker-cookbook's sl_basic; and
`supervised`, the same recipe under crucible_kitchen's name."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from cookbook.recipes import SMOLLM2
from cookbook.recipes.dataset_splits import DatasetBinding, row_converters
from kitchen.engine.graph import Workflow
from kitchen.engine.recipe import Recipe
from kitchen.workflows.common.evaluate import Scheduled
from kitchen.workflows.supervised import SupervisedConfig, supervised
from kitchen.workflows.supervised.state import SupervisedState


class SLBasicConfig(SupervisedConfig):
    """dataset: no_robots | tulu3 | bundled:NAME | path.jsonl | a hub name; test_dataset: auto
    (the dataset's own held-out split) | a name | None."""

    defaults: ClassVar[dict[str, Any]] = {
        "model_name": SMOLLM2,
        "test_dataset": "auto",
        "learning_rate": 2e-4,
        "eval_every": 8,
    }


def chat_workflow(
    cfg: SupervisedConfig, recipe: str, scheduled: Sequence[Scheduled] = ()
) -> Workflow[SupervisedState]:
    """The supervised workflow on cfg's chat datasets (bound by the recipe's `bind`), with the
    `scheduled` evaluators at their own cadences."""
    return supervised(cfg, row_converters(cfg, "chat")[0], recipe, scheduled)


class SLBasic(Recipe[SLBasicConfig]):
    """Supervised fine-tuning on chat data (LoRA), pipelined, with held-out NLL."""

    name = "sl_basic"

    bind = DatasetBinding("chat")

    def workflow(self, cfg: SLBasicConfig) -> Workflow[SupervisedState]:
        return chat_workflow(cfg, self.name)


class Supervised(SLBasic):
    """Supervised fine-tuning (crucible_kitchen's `supervised`; the same recipe as sl_basic)."""

    name = "supervised"
