"""chat_sl: supervised fine-tuning on a named chat dataset (tinker-cookbook's chat_sl CLI)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from cookbook.evals import inline_evaluators
from cookbook.recipes import SMOLLM2
from cookbook.recipes.dataset_splits import DatasetBinding
from cookbook.recipes.sl_basic import chat_workflow
from kitchen.engine.graph import Workflow
from kitchen.engine.recipe import Recipe
from kitchen.workflows.supervised import SupervisedConfig
from kitchen.workflows.supervised.state import SupervisedState


class ChatSLConfig(SupervisedConfig):
    """dataset also takes the short names no_robots and tulu3."""

    defaults: ClassVar[dict[str, Any]] = {
        "model_name": SMOLLM2,
        "test_dataset": "auto",
        "eval_every": 20,
    }

    inline_evals: list[str] = Field(
        default_factory=list,
        description="Evaluators run every infrequent_eval_every steps and at the end, by name: "
        "labels (greedy exact match), inspect (the shipped inspect-ai tasks pip_signoff and "
        "pip_tools); comma-separated on the command line",
    )
    inline_eval_limit: int | None = Field(
        None, gt=0, description="inline_evals=inspect: at most N samples per task (None = all)"
    )

    @field_validator("inline_evals", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [name.strip() for name in value.split(",") if name.strip()]
        return value


class ChatSL(Recipe[ChatSLConfig]):
    """Chat SFT on no_robots, tulu3, bundled or local conversations."""

    name = "chat_sl"

    bind = DatasetBinding("chat")

    def workflow(self, cfg: ChatSLConfig) -> Workflow[SupervisedState]:
        return chat_workflow(cfg, self.name, inline_evaluators(cfg, cfg.inline_evals))
