"""sl_loop: the minimal supervised loop, as tinker-cookbook's sl_loop (no pipelining, no evals)."""

from __future__ import annotations

from typing import Any, ClassVar

from cookbook.recipes import SMOLLM2
from cookbook.recipes.dataset_splits import DatasetBinding, row_converters
from kitchen.engine.graph import Workflow
from kitchen.engine.recipe import Recipe
from kitchen.workflows.supervised import SupervisedConfig, supervised_flat
from kitchen.workflows.supervised.state import SupervisedState


class SLLoopConfig(SupervisedConfig):
    # supervised_flat evaluates nothing and shows no samples: no test set by default
    defaults: ClassVar[dict[str, Any]] = {
        "model_name": SMOLLM2,
        "test_dataset": None,
        "num_samples_to_show": 0,
    }


class SLLoop(Recipe[SLLoopConfig]):
    """The flat supervised loop: forward_backward, optim_step, log, save."""

    name = "sl_loop"

    bind = DatasetBinding("chat")

    def workflow(self, cfg: SLLoopConfig) -> Workflow[SupervisedState]:
        return supervised_flat(cfg, row_converters(cfg, "chat")[0], self.name)
