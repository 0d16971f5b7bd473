"""Top-K soft-target stages: the teacher's top-K targets put on fixed datums (off-policy
distillation) or on the student's own samples (SDFT), the train steps on them, and SDFT's log.
The datums' math is train_core.distillation.topk's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from tinker import types

from kitchen.engine.stage import Context, Metrics
from kitchen.workflows.common.train_step import AdamSettings, Update
from kitchen.workflows.distillation.stages import TEACHER_STEP_READS
from kitchen.workflows.reinforcement.train import split_into
from kitchen.workflows.supervised.stages import CrossEntropyLoss
from train_core.schedules import lr_at


@dataclass(frozen=True, kw_only=True)
class TeacherTopKTargets:
    """The datums in state field `field` replaced by the same datums with teacher `teacher`'s
    renormalized top-`topk` next tokens as their targets (positions of weight 0 stay 0); with
    `routed`, datum i's teacher is `batch_teachers[i]` (several sources, a teacher each)."""

    field: str
    topk: int = 20
    teacher: int = 0
    routed: bool = False
    phase: ClassVar[str] = "reference"  # a teacher's forward, timed like a reference's

    @property
    def name(self) -> str:
        return f"teacher_topk_{self.field}"

    @property
    def reads(self) -> frozenset[str]:
        return frozenset({self.field, "teachers"} | ({"batch_teachers"} if self.routed else set()))

    @property
    def writes(self) -> frozenset[str]:
        return frozenset({self.field})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.distillation.topk import sequence_topk_datums

        data = getattr(ctx.state, self.field)
        if not data:
            return None
        teachers = ctx.state.teachers
        picks = ctx.state.batch_teachers if self.routed else [self.teacher] * len(data)
        soft = await sequence_topk_datums(data, [teachers[t].client for t in picks], self.topk)
        setattr(ctx.state, self.field, soft)
        return None


@dataclass(frozen=True)
class SoftCrossEntropyLoss(CrossEntropyLoss):
    """The loss of `SubmitTrainStep` on soft-target datums: the SFT loss's submit
    (forward_backward(cross_entropy)), here with [N, K] targets; reports the batch's
    teacher-student cross-entropy (`train_teacher_ce`)."""

    def metrics(
        self, data: list[types.Datum], fb: types.ForwardBackwardOutput, tokenizer: Any
    ) -> Metrics:
        from train_core.distillation.soft_ce import soft_cross_entropy
        from train_core.scoring import forward_logprobs

        weights = [d.loss_fn_inputs["weights"].to_numpy() for d in data]
        return {
            "num_sequences": len(data),
            "num_tokens": sum(d.model_input.length for d in data),
            "num_loss_tokens": float(sum(int((w.sum(axis=-1) > 0).sum()) for w in weights)),
            "train_teacher_ce": soft_cross_entropy(forward_logprobs(fb), data),
        }


@dataclass(frozen=True, kw_only=True)
class SDFTTargets:
    """SDFT's datums for this step: the batch's RL datums (`train_data`, kept for the logs), and
    in `soft_data` the same completions with the teacher's top-K targets, the teacher reading each
    after its group's question and golden answer (`question`, `golden_answer` of the group
    builder; train_core.distillation.build_topk_distillation_datums)."""

    topk: int = 20
    objective: str = "forward"  # a row of train_core's SDFT_OBJECTIVES: its datum builder
    skip_first_n_tokens: int = 3
    max_context_length: int = 32768
    system_prompt: str | None = None
    demo_template: str = ""
    name: str = "sdft_targets"
    phase: ClassVar[str] = "reference"
    reads: frozenset[str] = TEACHER_STEP_READS
    writes: frozenset[str] = frozenset({"train_data", "soft_data"})

    def teacher_prompts(self, builders_P: list[Any], renderer: Any) -> list[types.ModelInput]:
        from train_core.distillation.sdft import DEFAULT_DEMO_TEMPLATE, sdft_teacher_prompt

        template = self.demo_template or DEFAULT_DEMO_TEMPLATE
        return [
            sdft_teacher_prompt(b.question, b.golden_answer, renderer, self.system_prompt, template)
            for b in builders_P
        ]

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.distillation.sdft_objectives import SDFT_OBJECTIVES
        from train_core.rl import assemble_training_data

        state = ctx.state
        data_D, meta_D = assemble_training_data(state.trajectory_groups, state.advantages)
        prompts_P = self.teacher_prompts(state.env_group_builders, state.renderer)
        state.soft_data, metrics = await SDFT_OBJECTIVES[self.objective].build(
            data_D, meta_D, state.teachers[0].client, prompts_P, self.topk,
            self.max_context_length, len(state.tokenizer), self.skip_first_n_tokens,
        )  # fmt: skip
        state.train_data = data_D
        return {f"sdft/{k}": v for k, v in metrics.items()}


@dataclass(frozen=True, kw_only=True)
class SDFTHeldOut:
    """The held-out demonstrations as soft-target datums (`test_data`), once: the golden answer
    read as the student's completion, its targets the teacher's top K after the demonstration
    prompt. Scored by SoftCrossEntropyEvaluator as `test/teacher_ce`."""

    sdft: SDFTTargets
    topk: int = 20  # the held-out K, fixed whatever the objective (topk = 0 has none)
    name: str = "sdft_held_out"
    phase: ClassVar[str] = "reference"
    reads: frozenset[str] = frozenset({"test_dataset", "teachers", "renderer", "tokenizer"})
    writes: frozenset[str] = frozenset({"test_data"})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.distillation.sdft import demonstration_datum
        from train_core.distillation.topk import build_topk_distillation_datums

        state = ctx.state
        if state.test_dataset is None:
            return None
        builders = [
            b for i in range(len(state.test_dataset)) for b in state.test_dataset.get_batch(i)
        ]
        data_D = [
            demonstration_datum(b.question, b.golden_answer, state.renderer) for b in builders
        ]
        meta_D = [{"group_idx": i} for i in range(len(data_D))]
        s = self.sdft
        state.test_data, _ = await build_topk_distillation_datums(
            data_D, meta_D, state.teachers[0].client, s.teacher_prompts(builders, state.renderer),
            self.topk, s.max_context_length, len(state.tokenizer), s.skip_first_n_tokens,
        )  # fmt: skip
        return None


@dataclass(frozen=True, kw_only=True)
class SoftTargetStep:
    """The objective's loss (train_core's SDFT_OBJECTIVES: cross_entropy by default) on
    `soft_data` in `num_substeps` contiguous parts, an optim_step after each, at this step's
    scheduled learning rate; on top-K datums, `train_teacher_ce` of the first pass (the weights
    before the step)."""

    learning_rate: float
    num_substeps: int = 1
    lr_schedule: str = "constant"
    objective: str = "forward"
    name: str = "soft_target_step"
    reads: frozenset[str] = frozenset({"training_client", "soft_data", "total_steps"})
    writes: frozenset[str] = frozenset()

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.distillation.sdft_objectives import SDFT_OBJECTIVES
        from train_core.distillation.soft_ce import soft_cross_entropy
        from train_core.rl import datum_for_loss
        from train_core.scoring import forward_logprobs

        state, client = ctx.state, ctx.state.training_client
        objective = SDFT_OBJECTIVES[self.objective]
        lr = lr_at(state.step, state.total_steps, self.learning_rate, self.lr_schedule)
        chunks = [c for c in split_into(state.soft_data, self.num_substeps) if c]
        pending = []
        for chunk in chunks:
            update = Update(ctx.clock, client)
            if isinstance(objective.loss, str):
                trained = [datum_for_loss(d, objective.loss) for d in chunk]
                update.forward_backward(client.forward_backward, trained, objective.loss)
            else:
                update.forward_backward(client.forward_backward_custom, chunk, objective.loss)
            pending.append(update.optim_step(AdamSettings().params(lr)))
        logprobs_D: list[Any] = []
        loss_metrics: dict[str, float] = {}
        for future in pending:
            (output,) = (await future).passes
            logprobs_D.extend(forward_logprobs(output))
            loss_metrics.update({f"sdft/{k}": float(v) for k, v in (output.metrics or {}).items() if k.startswith(("reverse_kl", "student_entropy"))})  # fmt: skip
        metrics: dict[str, Any] = {"optim/lr": lr, **loss_metrics}
        if objective.soft_targets:
            metrics["train_teacher_ce"] = soft_cross_entropy(logprobs_D, state.soft_data)
        return metrics


@dataclass(frozen=True, kw_only=True)
class LogSDFTStep:
    """The step's rollout metrics under tinker-cookbook's keys (env/all/*, progress/*); SDFT's
    rewards are all 0, its signal is `train_teacher_ce`."""

    name: str = "log_sdft_step"
    reads: frozenset[str] = frozenset(
        {"trajectory_groups", "env_group_builders", "total_steps", "batch_idx"}
    )
    writes: frozenset[str] = frozenset()

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.rl import compute_trajectory_metrics

        state = ctx.state
        done_frac = (state.step + 1) / state.total_steps
        tags_P = [b.logging_tags() for b in state.env_group_builders]
        return {
            "progress/batch": state.batch_idx,
            "progress/done_frac": done_frac,
            "progress": done_frac,
            **compute_trajectory_metrics(state.trajectory_groups, tags_P),
        }


@dataclass(frozen=True, kw_only=True)
class ComposeSources:
    """Several supervised sources mixed per batch, each distilled from its own teacher (the
    cookbook's DatasetWithTeacher list): source 0 is `train_data`, sources 1.. are loaded here
    (`extra`: (dataset, split, row converter) each) and rendered the same way; batch i takes
    each source's share of `batch_size` by `weights` (train_core CompositeDataset), and the
    run is as long as its shortest source allows."""

    extra: tuple[tuple[str, str, Any], ...]
    weights: tuple[float, ...]
    batch_size: int
    num_epochs: int = 1
    seed: int = 0
    max_length: int | None = None
    train_on_what: str | None = "all_assistant_messages"
    name: str = "compose_sources"
    reads: frozenset[str] = frozenset({"train_data", "renderer"})
    writes: frozenset[str] = frozenset({"composite", "n_batches", "total_steps"})
    ports: frozenset[str] = frozenset({"datasets"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.distillation import CompositeDataset
        from train_core.supervised import conversation_to_datum

        store, renderer = ctx.port("datasets"), ctx.state.renderer
        sources: list[tuple[str, Any, Any]] = [("dataset_0", ctx.state.train_data, 0)]
        for i, (dataset, split, convert) in enumerate(self.extra, start=1):
            rows = store.load(dataset, split)
            where = getattr(rows, "where", None)
            converted = [
                c
                for j, row in enumerate(rows)
                if (c := convert(row, where(j) if where else f"{dataset} row {j}")) is not None
            ]
            datums = [conversation_to_datum(c["messages"], renderer, self.max_length, self.train_on_what) for c in converted]  # fmt: skip
            sources.append((f"dataset_{i}", datums, i))
        composite = CompositeDataset.from_weights(sources, self.weights, self.batch_size, self.seed)
        ctx.state.composite = composite
        ctx.state.n_batches = len(composite)
        ctx.state.total_steps = len(composite) * self.num_epochs
        return {f"composite/{name}_per_batch": s.per_batch for name, s in zip([n for n, _, _ in sources], composite.sources, strict=True)}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class CompositeBatch:
    """Batch `batch_idx` of the composite in this epoch (`batch`), and each datum's teacher
    (`batch_teachers`: the index of its source)."""

    name: str = "composite_batch"
    reads: frozenset[str] = frozenset({"composite", "batch_idx", "epoch_idx"})
    writes: frozenset[str] = frozenset({"batch", "batch_teachers"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        tagged = ctx.state.composite.get_batch(ctx.state.batch_idx, ctx.state.epoch_idx)
        ctx.state.batch = [t.item for t in tagged]
        ctx.state.batch_teachers = [t.teacher for t in tagged]
        return None
