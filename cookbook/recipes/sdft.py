"""sdft: self-distillation fine-tuning, the model as its own teacher seeing the demonstration
(tinker-cookbook's recipes/sdft and distillation/sdft.py: top-K forward KL by default, reverse KL
over the top K with reverse, per-token importance sampling with topk=0).

Locally: SmolLM2-135M-Instruct on the bundled Pip conversations: the question is the first user
turn, the golden answer the assistant's reply; the student answers the question alone, its frozen
base reads that answer after the question and the golden answer, and the student moves towards
the base's top-K distribution. test/teacher_ce is the held-out teacher-student cross-entropy on
the test conversations' golden answers.
`--dataset sciknoweval | toolalpaca`: the cookbook's two sets (cookbook.datasets.demonstrations),
a few bundled rows in their shape by default, the hub's with `--demo-source hub`, split 90/10 by
the cookbook's seed.
`--preset cookbook`: the cookbook's CLI defaults (Qwen/Qwen3-8B, K = 20, 32 questions x 1 answer,
LR 2e-5, 2048 tokens, LoRA rank 128) on Tinker.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias

import numpy as np
from pydantic import Field, field_validator

from cookbook.datasets.catalog import convert_rows, load_chat
from cookbook.datasets.demonstrations import DEMONSTRATION_SETS, carve_demonstrations
from cookbook.envs.problem_rows import ItemBatches
from cookbook.envs.prompt_env import PromptGroupBuilder
from cookbook.recipes import SMOLLM2
from kitchen.engine.errors import ConfigError, DataError
from kitchen.engine.graph import Workflow
from kitchen.engine.recipe import Recipe
from kitchen.workflows.common.evaluate import Scheduled
from kitchen.workflows.distillation.config import SDFTWorkflowConfig
from kitchen.workflows.distillation.sdft import sdft
from kitchen.workflows.distillation.state import SDFTState
from train_core.rl.types import EnvGroupBuilder, RLEnvContext


@dataclass(frozen=True)
class DemonstrationGroupBuilder(PromptGroupBuilder):
    """A question the student answers (reward 0), and the golden answer its teacher is shown."""

    golden_answer: str = ""

    @property
    def question(self) -> str:
        return self.prompt


# (question, golden answer) pairs in batches
DemonstrationBatches: TypeAlias = ItemBatches[tuple[str, str]]


def demonstration_batches(
    pairs: list[tuple[str, str]], renderer: Any, batch_size: int, group_size: int
) -> DemonstrationBatches:
    """Consecutive slices of (question, golden answer) pairs, one group per question."""

    def group(pair: tuple[str, str]) -> EnvGroupBuilder:
        question, answer = pair
        return DemonstrationGroupBuilder(
            question, renderer, group_size, dataset_name="sdft", golden_answer=answer
        )

    return ItemBatches(pairs, batch_size, group)


def demonstrations(rows: list[dict[str, Any]], where: str) -> list[tuple[str, str]]:
    """(first user turn, the assistant reply after it) of each conversation that has both."""
    pairs = []
    for row in rows:
        messages = row["messages"]
        for user, reply in itertools.pairwise(messages):
            if user["role"] == "user" and reply["role"] == "assistant":
                pairs.append((str(user["content"]), str(reply["content"])))
                break
    if not pairs:
        raise DataError(f"{where}: no conversation with a user turn and an assistant reply")
    return pairs


@dataclass(frozen=True)
class Demonstrations:
    """The env dataset factory: demonstrations from `dataset` (shuffled by seed) and the first
    `test_demos` of `test_dataset` held out."""

    dataset: str
    test_dataset: str | None
    groups_per_batch: int
    group_size: int
    seed: int = 0
    test_demos: int = 16
    demo_source: str = "bundled"
    domain: str = "Chemistry"

    def __call__(
        self, ctx: RLEnvContext
    ) -> tuple[DemonstrationBatches, DemonstrationBatches | None]:
        if ctx.datasets is None:
            raise ConfigError("sdft needs a dataset store; none is configured")
        if self.dataset in DEMONSTRATION_SETS:
            return self.named_set(ctx)
        pairs = demonstrations(load_chat(ctx.datasets, self.dataset), self.dataset)
        order = np.random.default_rng(self.seed).permutation(len(pairs))
        train = demonstration_batches([pairs[i] for i in order], ctx.renderer, self.groups_per_batch, self.group_size)  # fmt: skip
        if not self.test_dataset or self.test_demos == 0:
            return train, None
        name, _, split = self.test_dataset.partition("@")
        test_pairs = demonstrations(
            load_chat(ctx.datasets, name, split or "test"), self.test_dataset
        )
        test_pairs = test_pairs[: self.test_demos]
        return train, demonstration_batches(test_pairs, ctx.renderer, len(test_pairs), 1)

    def named_set(
        self, ctx: RLEnvContext
    ) -> tuple[DemonstrationBatches, DemonstrationBatches | None]:
        """SciKnowEval or ToolAlpaca as the cookbook loads them: converted, one domain kept
        (SciKnowEval), carved 90/10 by its seed, the training rows in that order."""
        spec = DEMONSTRATION_SETS[self.dataset]
        source, split = {"bundled": spec.bundled, "hub": spec.hub}.get(
            self.demo_source, (self.demo_source, "train")
        )
        assert ctx.datasets is not None
        rows = convert_rows(ctx.datasets.load(source, split), spec.convert).rows
        if spec.by_domain:
            found = sorted({str(r.get("domain")) for r in rows})
            rows = [r for r in rows if r.get("domain") == self.domain]
            if not rows:
                raise DataError(
                    f"{source}: no L3 multiple-choice rows of domain {self.domain!r}; "
                    f"domains there: {', '.join(found)}"
                )
        train_rows, test_rows = carve_demonstrations(rows)
        if not train_rows:
            raise DataError(f"{source}: {len(rows)} demonstrations leave none for training")
        train_pairs = demonstrations(train_rows, source)
        train = demonstration_batches(train_pairs, ctx.renderer, self.groups_per_batch, self.group_size)  # fmt: skip
        test_pairs = demonstrations(test_rows, source)[: self.test_demos] if test_rows else []
        if not test_pairs:
            return train, None
        return train, demonstration_batches(test_pairs, ctx.renderer, len(test_pairs), 1)


class SDFTConfig(SDFTWorkflowConfig):
    defaults: ClassVar[dict[str, Any]] = {
        "model_name": SMOLLM2,
        "group_size": 1,
        "groups_per_batch": 4,
        "num_batches": 10,
        "max_tokens": 48,
        "learning_rate": 2e-4,
        "eval_every": 5,
    }
    dataset: str = Field(
        "bundled:chat",
        description="Demonstrations: chat rows (first user turn = question, its reply = golden answer): bundled:NAME | a JSONL | a hub chat dataset; or sciknoweval | toolalpaca (the cookbook's sets, from --demo-source, split 90/10 by its seed; --test-dataset unused)",
    )
    demo_source: str = Field(
        "bundled",
        description="With --dataset sciknoweval | toolalpaca: bundled (a few offline rows in the hub's shape) | hub (hicai-zju/SciKnowEval, tangqiaoyu/ToolAlpaca) | a local file of such rows",
    )
    inline_benchmarks: list[str] = Field(
        default_factory=list,
        description="Sampled benchmarks run every infrequent_eval_every steps and at the end (test/NAME/pass@k): gsm8k | math500, the benchmarks of kitchen eval --harness benchmark; comma-separated on the command line",
    )
    benchmark_source: Literal["bundled", "hub"] = Field(
        "bundled", description="inline_benchmarks: their bundled slices | their hub sets"
    )
    benchmark_limit: int | None = Field(
        None, gt=0, description="inline_benchmarks: at most N problems each (None = all)"
    )
    benchmark_samples: int = Field(
        1, ge=1, description="inline_benchmarks: answers per problem (pass@1 and pass@N)"
    )

    @field_validator("inline_benchmarks", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        items = [value] if isinstance(value, str) else value
        if isinstance(items, list) and all(isinstance(v, str) for v in items):
            return [n.strip() for v in items for n in v.split(",") if n.strip()]
        return value

    sciknoweval_domain: str = Field(
        "Chemistry",
        description="With --dataset sciknoweval: the domain kept (the cookbook's default)",
    )
    test_dataset: str | None = Field(
        "bundled:chat@test",
        description="Held-out demonstrations: NAME[@SPLIT] (split default test) | None",
    )
    num_test_demos: int = Field(16, ge=0, description="Held-out demonstrations scored (0 = none)")


class SDFT(Recipe[SDFTConfig]):
    """Self-distillation: the model, shown the demonstration, teaches itself without it."""

    name = "sdft"

    def workflow(self, cfg: SDFTConfig) -> Workflow[SDFTState]:
        make = Demonstrations(cfg.dataset, cfg.test_dataset, cfg.groups_per_batch, cfg.group_size,
                              cfg.seed, cfg.num_test_demos, cfg.demo_source,
                              cfg.sciknoweval_domain)  # fmt: skip
        if not cfg.inline_benchmarks:
            return sdft(cfg, make, self.name)
        from cookbook.evals.inline_benchmarks import InlineBenchmark, LoadBenchmarks

        names = tuple(cfg.inline_benchmarks)
        n = cfg.benchmark_samples
        inline = [
            Scheduled(InlineBenchmark(benchmark=b, num_samples=n, ks=tuple(sorted({1, n})),
                                      max_tokens=cfg.max_tokens),
                      cfg.evaluation.infrequent_every, name=b)
            for b in names
        ]  # fmt: skip
        load = LoadBenchmarks(names=names, source=cfg.benchmark_source, limit=cfg.benchmark_limit)
        return sdft(cfg, make, self.name, inline, [load])
