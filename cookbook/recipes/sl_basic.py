"""sl_basic: LoRA fine-tune of a chat model on conversations, as tinker-cookbook's sl_basic."""

from __future__ import annotations

from typing import Any, ClassVar

from cookbook.recipes import SMOLLM2
from cookbook.recipes.chat_data import resolve_chat_dataset
from kitchen.engine.graph import Workflow
from kitchen.engine.recipe import Recipe
from kitchen.workflows.supervised import SupervisedConfig, supervised
from kitchen.workflows.supervised.state import SupervisedState


class SLBasicConfig(SupervisedConfig):
    defaults: ClassVar[dict[str, Any]] = {
        "model_name": SMOLLM2,
        "learning_rate": 2e-4,
        "eval_every": 8,
    }


class SLBasic(Recipe[SLBasicConfig]):
    """Supervised fine-tuning on chat data (LoRA), pipelined, with held-out NLL."""

    name = "sl_basic"
    Config = SLBasicConfig
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "cookbook": {
            "model_name": "Qwen/Qwen3.5-9B-Base",
            "backend": "tinker",
            "dataset": "no_robots",
            "test_dataset": "no_robots",
            "batch_size": 128,
            "max_length": 32768,
            "learning_rate": 2e-4,
            "lr_schedule": "linear",
            "num_epochs": 1,
            "eval_every": 8,
            "save_every": 20,
            "num_samples_to_show": 0,
        }
    }

    def workflow(self, cfg: SLBasicConfig) -> Workflow[SupervisedState]:
        source, convert = resolve_chat_dataset(cfg.dataset)
        test = resolve_chat_dataset(cfg.test_dataset)[0] if cfg.test_dataset else None
        return supervised(
            cfg.model_copy(update={"dataset": source, "test_dataset": test}), convert, self.name
        )
