"""Prompt-only environments for on-policy distillation: the student answers a prompt, the env gives
no reward (the teacher's KL is the only signal), as tinker-cookbook 0.6.1's PromptOnlyEnv.

Several prompt sources mix through train_core's CompositeDataset; every group builder carries its
source's index and name (for teacher_kl/dataset_{i}) and the conversation the student saw
(`prompt_messages`), so a teacher with its own chat format can re-render it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cookbook.datasets.catalog import load_prompts
from cookbook.envs.unscored import UnscoredEnv
from kitchen.engine.errors import DataError
from train_core.completers import RendererLike
from train_core.distillation import CompositeDataset, DistillationSource, TaggedItem
from train_core.renderers.types import Message
from train_core.rl.types import (
    Env,
    EnvGroupBuilder,
    RLDataset,
    RLDatasetFactory,
    RLEnvContext,
)

# tinker-cookbook's dataset names -> (hub name, split); their rows go through `prompt_of`.
HUB_PROMPTS = {
    "deepmath": ("zwhe99/DeepMath-103K", "train"),
    "tulu3": ("allenai/tulu-3-sft-mixture", "train"),
}


class PromptOnlyEnv(UnscoredEnv):
    """One prompt (after `convo_prefix`), any answer, reward 0 (format and correctness are not
    scored)."""

    def __init__(
        self, prompt: str, renderer: RendererLike, convo_prefix: list[Message] | None = None
    ) -> None:
        self.prompt, self.convo_prefix = prompt, convo_prefix or []
        super().__init__([*self.convo_prefix, {"role": "user", "content": prompt}], renderer)


@dataclass(frozen=True)
class PromptGroupBuilder(EnvGroupBuilder):
    """`group_size` rollouts of one prompt, tagged with the source it came from."""

    prompt: str
    renderer: Any
    group_size: int
    dataset_idx: int = 0
    dataset_name: str = "prompts"
    convo_prefix: tuple[Message, ...] = ()

    @property
    def prompt_messages(self) -> list[Message]:
        """The conversation the student answers (what a teacher re-renders in its own format)."""
        return [*self.convo_prefix, {"role": "user", "content": self.prompt}]

    async def make_envs(self) -> Sequence[Env]:
        prefix = list(self.convo_prefix)
        return [PromptOnlyEnv(self.prompt, self.renderer, prefix) for _ in range(self.group_size)]

    def logging_tags(self) -> list[str]:
        return [self.dataset_name]


class PromptOnlyDataset(RLDataset):
    """RL batches over a CompositeDataset of prompts: batch i holds each source's share."""

    def __init__(self, composite: CompositeDataset[str], renderer: Any, group_size: int) -> None:
        self.composite = composite
        self.renderer = renderer
        self.group_size = group_size

    def __len__(self) -> int:
        return len(self.composite)

    def _builder(self, tagged: TaggedItem[str]) -> PromptGroupBuilder:
        return PromptGroupBuilder(
            tagged.item, self.renderer, self.group_size, tagged.dataset_idx, tagged.dataset_name
        )

    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]:
        return [self._builder(t) for t in self.composite.get_batch(index)]


@dataclass(frozen=True)
class PromptSource:
    """A prompt dataset (bundled:NAME, a local JSONL, a hub name, deepmath, tulu3) and its share
    of each batch."""

    dataset: str
    groups_per_batch: int
    name: str = ""
    split: str = "train"
    max_prompts: int | None = None

    @property
    def label(self) -> str:
        return self.name or self.dataset.removeprefix("bundled:")


def source_prompts(store: Any, source: PromptSource, max_prompt_tokens: int | None, tokenizer: Any) -> list[str]:  # fmt: skip
    """The source's prompts (`load_prompts`), each truncated to `max_prompt_tokens` tokens (as
    0.6.1 does)."""
    if store is None:
        raise DataError(f"prompt dataset {source.dataset}: no dataset store configured")
    dataset, split = HUB_PROMPTS.get(source.dataset, (source.dataset, source.split))
    prompts = load_prompts(store, dataset, split, source.max_prompts)
    if max_prompt_tokens is None:
        return prompts
    return [_truncated(prompt, max_prompt_tokens, tokenizer) for prompt in prompts]


def _truncated(prompt: str, max_tokens: int, tokenizer: Any) -> str:
    tokens = tokenizer.encode(prompt)
    return tokenizer.decode(tokens[:max_tokens]) if len(tokens) > max_tokens else prompt


@dataclass(frozen=True)
class PromptDatasets:
    """RLDatasetFactory: the composite of `sources` (source i is dataset_{i}); no test set."""

    sources: tuple[PromptSource, ...]
    group_size: int
    seed: int = 0
    max_prompt_tokens: int | None = 1024

    def __call__(self, ctx: RLEnvContext) -> tuple[PromptOnlyDataset, None]:
        tokenizer = ctx.tokenizer
        composite = CompositeDataset(
            [
                DistillationSource(
                    s.label,
                    source_prompts(ctx.datasets, s, self.max_prompt_tokens, tokenizer),
                    teacher=i,
                    per_batch=s.groups_per_batch,
                )
                for i, s in enumerate(self.sources)
            ],
            seed=self.seed,
        )
        return PromptOnlyDataset(composite, ctx.renderer, self.group_size), None


def prompt_datasets(
    sources: Sequence[PromptSource], group_size: int, seed: int = 0, max_prompt_tokens: int | None = 1024
) -> RLDatasetFactory:  # fmt: skip
    return PromptDatasets(tuple(sources), group_size, seed, max_prompt_tokens)


def resolve_system_prompt(value: str | None) -> str | None:
    """A teacher's system prompt from a config value: "bundled:prompt_distill" (the bundled
    teacher prompt), a path to a text file, literal text, or None / "" for none."""
    if not value:
        return None
    if value == "bundled:prompt_distill":
        from cookbook.data import teacher_system_prompt

        return teacher_system_prompt()
    path = Path(value).expanduser()
    if len(value) < 512 and "\n" not in value and path.suffix in {".txt", ".md"}:
        if not path.is_file():
            raise DataError(f"teacher system prompt file {value} does not exist")
        return path.read_text(encoding="utf-8")
    return value
