"""sign_off_sft: supervised fine-tuning on the bundled chats, with every answer re-signed.

A recipe is a Config (pydantic: every field a flag of `kitchen run`, with its help text and
validation) and a `workflow(cfg)` factory. This one reuses Kitchen's supervised workflow and
adds a row converter, which rewrites each assistant message's sign-off.
"""

from __future__ import annotations

from typing import Any, ClassVar, cast

from pydantic import Field

from kitchen import Recipe, Workflow
from kitchen.engine.errors import DataError
from kitchen.workflows.common.setup import RowConverter
from kitchen.workflows.supervised import SupervisedConfig, supervised
from kitchen.workflows.supervised.state import SupervisedState

BUNDLED_SIGN_OFF = "Happy cooking!"


class SignOffConfig(SupervisedConfig):
    model_name: str = Field("kitchen/tiny-llama", description="Base model to fine-tune")
    sign_off: str = Field(
        "Bon appetit!", min_length=1, description="What every answer ends with instead"
    )
    test_dataset: str | None = Field(None, description="Held-out conversations (None = none)")
    batch_size: int = Field(8, gt=0, description="Conversations per step")
    max_length: int | None = Field(128, gt=0, description="Truncate examples to this many tokens")
    learning_rate: float = Field(5e-4, gt=0, description="Adam learning rate")
    lora_rank: int = Field(8, ge=0, description="LoRA rank")
    register_model: bool | None = Field(
        False, description="Register the final model in the model registry"
    )


def re_sign(sign_off: str) -> RowConverter:
    """A row converter: (row, where) -> item or None (skip). Raise DataError naming `where` for a
    malformed row, so the user sees file:line."""

    def convert(row: dict[str, Any], where: str) -> dict[str, Any] | None:
        messages = row.get("messages")
        if not isinstance(messages, list):
            raise DataError(f'{where}: field "messages" is missing; expected a list of messages')
        out: list[dict[str, Any]] = []
        for m in cast(list[dict[str, Any]], messages):
            message = dict(m)
            if message.get("role") == "assistant":
                text = str(message.get("content", ""))
                message["content"] = text.replace(BUNDLED_SIGN_OFF, sign_off)
            out.append(message)
        return {"messages": out}

    return convert


class SignOffSFT(Recipe[SignOffConfig]):
    """Fine-tune on the bundled chats, answers re-signed with --sign-off."""

    name = "sign_off_sft"
    Config = SignOffConfig
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "smollm2": {"model_name": "HuggingFaceTB/SmolLM2-135M-Instruct", "learning_rate": 2e-4}
    }

    def workflow(self, cfg: SignOffConfig) -> Workflow[SupervisedState]:
        return supervised(cfg, re_sign(cfg.sign_off), recipe=self.name)
