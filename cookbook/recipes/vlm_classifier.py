"""vlm_classifier: SFT of a vision-language model on image classification, as tinker-cookbook's
recipes/vlm_classifier.

Its formats: the user turn is the image then "What is the name of the subject in this photo?",
the answer "The subject in this photo is: CLASS" (cookbook/datasets/images.py), trained on the
last assistant message; held-out accuracy is sampled greedily with that answer's start prefilled
and the class read after it (LabelEvaluator). Locally: the tiny random-weight VLM learns the
colours of the bundled `shapes` pictures; `--preset cookbook` is tinker-cookbook's run
(Qwen3.5-397B-A17B; its datasets are hub sets with integer labels, so a hub run names a set
whose label column holds class names).
"""

from __future__ import annotations

from functools import partial
from typing import Any, ClassVar

from pydantic import Field

from cookbook.datasets.images import ANSWER_PREFIX, image_label_row
from cookbook.recipes.dataset_splits import DatasetBinding
from kitchen.engine.graph import Workflow
from kitchen.engine.recipe import Recipe
from kitchen.workflows.supervised import SupervisedConfig, supervised_parts
from kitchen.workflows.supervised.state import SupervisedState
from train_core.evaluation.labels import LabelEvaluator

TINY_VLM = "kitchen/tiny-qwen3-vl"


class VLMClassifierConfig(SupervisedConfig):
    """dataset: bundled:shapes | a local file or hub set with an image and a class-name column."""

    takes_images: ClassVar[bool] = True
    defaults: ClassVar[dict[str, Any]] = {
        "model_name": TINY_VLM,
        "renderer_name": "qwen3_vl_instruct",
        "dataset": "bundled:shapes",
        "test_dataset": "auto",
        "train_on_what": "last_assistant_message",
        # The tiny VLM's weights are random: every weight trains (LoRA learned too slowly on it),
        # at a constant LR, five passes (75 steps); a real VLM takes LoRA (--lora-rank 32).
        "lora_rank": 0,
        "batch_size": 16,
        "num_epochs": 5,
        "learning_rate": 1e-2,
        "lr_schedule": "constant",
        "eval_every": 15,
        "num_samples_to_show": 3,
        "sample_max_tokens": 8,
    }

    image_column: str = Field("image", description="The dataset's image column")
    label_column: str = Field("label", description="The dataset's class-name column")
    max_image_size: int = Field(
        480, gt=0, description="Longest image side in pixels; larger images are scaled down"
    )
    n_eval: int | None = Field(
        128, gt=0, description="Held-out images whose class is sampled for accuracy (None: all)"
    )
    eval_max_tokens: int = Field(
        8, gt=0, description="Tokens sampled per held-out image (the class name and the stop)"
    )


class VLMClassifier(Recipe[VLMClassifierConfig]):
    """Image classification SFT of a vision-language model, with held-out accuracy.

    The tiny default model trains every weight; a real VLM takes LoRA (--lora-rank 32)."""

    name = "vlm_classifier"

    bind = DatasetBinding("image_label")

    def workflow(self, cfg: VLMClassifierConfig) -> Workflow[SupervisedState]:
        convert = partial(
            image_label_row,
            image_column=cfg.image_column,
            label_column=cfg.label_column,
            max_image_size=cfg.max_image_size,
        )
        accuracy = LabelEvaluator(
            max_tokens=cfg.eval_max_tokens, limit=cfg.n_eval, prefill=ANSWER_PREFIX
        )
        parts = supervised_parts(cfg, convert, self.name, evaluator=accuracy)
        return Workflow(self.name, SupervisedState, nodes=parts.nodes())
