"""chat_sl: supervised fine-tuning on a named chat dataset (tinker-cookbook's chat_sl CLI)."""

from __future__ import annotations

from typing import Any, ClassVar

from cookbook.recipes import SMOLLM2
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


class ChatSL(Recipe[ChatSLConfig]):
    """Chat SFT on no_robots, tulu3, bundled or local conversations."""

    name = "chat_sl"
    Config = ChatSLConfig
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "cookbook": {
            "model_name": "Qwen/Qwen3.5-9B-Base",
            "backend": "tinker",
            "dataset": "no_robots",
            "test_dataset": "no_robots",
            "learning_rate": 1e-4,
            "lr_schedule": "linear",
            "num_epochs": 1,
            "lora_rank": 32,
            "save_every": 20,
            "eval_every": 20,
            "max_length": 16384,
            "batch_size": 256,
            "num_samples_to_show": 0,
        }
    }

    def workflow(self, cfg: ChatSLConfig) -> Workflow[SupervisedState]:
        return chat_workflow(cfg, self.name)
