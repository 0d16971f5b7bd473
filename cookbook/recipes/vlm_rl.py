"""vlm_rl: policy-gradient RL whose prompts carry images, with a verifiable reward: the model names
the colour (or the shape) of the bundled `shapes` pictures and is rewarded when it names the right
one (cookbook/envs/shapes.py). It asks vlm_classifier's question, so it goes on from a model that
recipe fine-tuned (`--registered-model registry:vlm_classifier`): from there the tiny VLM's reward
rises within minutes on a CPU. A Qwen3-VL model runs it on Tinker with `--backend tinker -m ...`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from cookbook.envs.shapes import ShapesEnvs, Target
from cookbook.recipes.env_rl import EnvRL
from cookbook.recipes.vlm_classifier import TINY_VLM
from kitchen.workflows.reinforcement import RLConfig
from train_core.rl.types import RLDatasetFactory


class VLMRLConfig(RLConfig):
    takes_images: ClassVar[bool] = True
    defaults: ClassVar[dict[str, Any]] = {
        "model_name": TINY_VLM,
        "renderer_name": "qwen3_vl_instruct",
        # Every weight, as vlm_classifier trains the tiny VLM, so RL starts from its weights
        # (--registered-model registry:vlm_classifier); a random model names no colour to reward.
        "lora_rank": 0,
        "group_size": 8,
        "groups_per_batch": 8,
        "num_batches": 15,
        "learning_rate": 1e-3,
        "max_tokens": 16,
        "remove_constant_reward_groups": True,
        "eval_every": 5,
    }

    dataset: str = Field(
        "bundled:shapes",
        description="Pictures: bundled:shapes | a local file or hub set with an image column and "
        "the target column",
    )
    target: Target = Field("colour", description="What the model names: colour | shape")
    num_test_problems: int = Field(
        32, ge=0, description="Held-out pictures evaluated every eval_every steps (0 = none)"
    )


class VLMRL(EnvRL[VLMRLConfig]):
    """RL on image prompts: name the colour or shape in the picture (verifiable reward)."""

    name = "vlm_rl"

    def envs(self, cfg: VLMRLConfig) -> RLDatasetFactory:
        return ShapesEnvs(
            cfg.dataset,
            cfg.groups_per_batch,
            cfg.group_size,
            cfg.target,
            cfg.seed,
            cfg.num_test_problems,
        )
