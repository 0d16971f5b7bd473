"""decisions: a decision model, as tinker-cookbook 0.6.1's recipes/decisions: each question's
choices get the ids A, B, ...; the reply `choice#?` is prefilled and the model's logprobs of the
ids at `?` (one sample request with `target_prompt_logprobs`), softmaxed over the choices, are the
decision's probabilities (cookbook/datasets/decisions.py renders them).

Training: hard labels (`labels=hard`) take cross entropy on the answer's id at `?`; soft labels
(`labels=soft`) take a loss on the choice distribution against the row's target probabilities
(`soft_loss=brier`, the cookbook forecasting run's, or `cross_entropy`), through
forward_backward_custom. Held out: accuracy (argmax = answer), mean probability of the answer,
and the Brier score against the rows' probabilities, each from the sampled decision.

Locally: `bundled:decisions`, chance questions with known odds (a die above k, a marble's
colour), whose "answer" is one drawn outcome and "probs" the true odds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field
from tinker import types

from cookbook.datasets.decisions import (
    PROBABILITY_LOSSES,
    as_decision,
    choice_probability_loss,
    decision_row,
    hard_label_datum,
    render_decision,
    soft_label_datum,
    target_request,
)
from cookbook.recipes import SMOLLM2
from kitchen.engine.errors import DataError
from kitchen.engine.futures import APIFuture
from kitchen.engine.graph import Await, Every, Loop, Node, When, Workflow
from kitchen.engine.recipe import Recipe
from kitchen.engine.stage import Context, Metrics
from kitchen.workflows.common.batches import GetBatch, ShuffleEpoch
from kitchen.workflows.common.checkpoint import SaveCheckpoint, SaveFinal, rolling_checkpoints
from kitchen.workflows.common.config import EpochTrainConfig
from kitchen.workflows.common.evaluate import Evaluate
from kitchen.workflows.common.parts import optional
from kitchen.workflows.common.setup import LoadDataset
from kitchen.workflows.common.start import init_training_client, registration_nodes, start_point
from kitchen.workflows.common.train_step import LogTrainStep, submit_train_step
from kitchen.workflows.supervised import SupervisedState
from kitchen.workflows.supervised.stages import CrossEntropyLoss
from train_core.evaluation.evaluator import EvaluatorClient
from train_core.futures import resolve_future

Labels = Literal["hard", "soft"]


class DecisionsConfig(EpochTrainConfig):
    """dataset: bundled:decisions | a local file or hub set of {"question", "choices",
    "answer", "probs"} rows; test_dataset: the same, held out (None: no evaluation)."""

    defaults: ClassVar[dict[str, Any]] = {
        "model_name": SMOLLM2,
        "dataset": "bundled:decisions",
        "test_dataset": "bundled:decisions",
        "batch_size": 16,
        "learning_rate": 1e-4,
        "eval_every": 5,
    }

    labels: Labels = Field(
        "hard", description="hard: cross entropy on the answer; soft: a loss on the choice odds"
    )
    soft_loss: Literal["brier", "cross_entropy"] = Field(
        "brier", description="With labels=soft: the loss on the choice distribution"
    )
    choice_prefix: str = Field(
        "choice#", description="What each reply starts with before the choice id (A, B, ...)"
    )
    n_eval: int | None = Field(
        64, gt=0, description="Held-out decisions scored per evaluation (None: all)"
    )


@dataclass(frozen=True, kw_only=True)
class TokenizeDecisions:
    """Render each decision into its datum: the answer's id at the placeholder (hard labels) or
    every choice's id with its target probability (soft labels)."""

    labels: Labels
    batch_size: int
    num_epochs: int
    prefix: str
    name: str = "tokenize_decisions"
    reads: frozenset[str] = frozenset({"conversations", "renderer"})
    writes: frozenset[str] = frozenset({"train_data", "n_batches", "total_steps"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        state = ctx.state
        data = []
        decisions = [as_decision(item) for item in state.conversations]
        width = max(len(d.choices) for d in decisions)  # one target shape for every batch
        for i, decision in enumerate(decisions):
            rendering = render_decision(decision, state.renderer, self.prefix)
            if self.labels == "hard":
                data.append(hard_label_datum(rendering, decision.answer))
            elif decision.probs is None:
                raise DataError(f"decision {i} has no 'probs'; labels=soft needs target odds")
            else:
                data.append(soft_label_datum(rendering, decision.probs, width))
        if len(data) < self.batch_size:
            raise DataError(f"{len(data)} decisions, fewer than batch_size {self.batch_size}")
        state.train_data = data
        state.n_batches = len(data) // self.batch_size
        state.total_steps = state.n_batches * self.num_epochs
        return None


@dataclass(frozen=True)
class ChoiceProbabilityLoss:
    """The soft-label loss of the train step: forward_backward_custom with a loss on each
    datum's choice distribution; reports the loss's metrics under train_."""

    loss: str
    reads: ClassVar[frozenset[str]] = frozenset()
    progress_after_step: ClassVar[bool] = True

    def submit(
        self, client: Any, batch: list[types.Datum], state: Any
    ) -> APIFuture[types.ForwardBackwardOutput]:
        loss_fn = choice_probability_loss(PROBABILITY_LOSSES[self.loss])
        return client.forward_backward_custom(batch, loss_fn)  # type: ignore[no-any-return]

    def metrics(
        self, data: list[types.Datum], fb: types.ForwardBackwardOutput, tokenizer: Any
    ) -> Metrics:
        return {"num_sequences": len(data), **{f"train_{k}": v for k, v in fb.metrics.items()}}


@dataclass(frozen=True, kw_only=True)
class DecisionEvaluator:
    """An Evaluator: each held-out decision sampled as the cookbook's sample_decision (one
    request, max_tokens 1, target_prompt_logprobs at the placeholder): `{prefix}/accuracy`,
    `{prefix}/answer_prob` and, for rows with target odds, `{prefix}/brier`."""

    prefix: str = "test"
    choice_prefix: str = "choice#"
    limit: int | None = 64
    name: ClassVar[str] = "decisions"
    client: ClassVar[EvaluatorClient] = "sampling"
    inputs: ClassVar[tuple[str, ...]] = ("test_conversations", "renderer")

    async def __call__(
        self, client: Any, /, *, test_conversations: list[dict[str, Any]] | None, renderer: Any
    ) -> dict[str, float]:
        decisions = [as_decision(item) for item in (test_conversations or [])[: self.limit]]
        if not decisions:
            return {}
        renderings = [render_decision(d, renderer, self.choice_prefix) for d in decisions]
        params = types.SamplingParams(max_tokens=1)
        futures = [
            client.sample(
                types.ModelInput.from_ints(r.tokens),
                1,
                params,
                target_prompt_logprobs=target_request(r),
            )
            for r in renderings
        ]
        hits, answer_p, briers = [], [], []
        for decision, rendering, future in zip(decisions, renderings, futures, strict=True):
            answered = (await resolve_future(future)).target_prompt_logprobs
            logprobs_K = answered.to_numpy()[rendering.choice_pos - 1]
            probs_K = np.exp(logprobs_K - logprobs_K.max())
            probs_K /= probs_K.sum()
            labels = decision.labels
            hits.append(float(labels[int(probs_K.argmax())] == decision.answer))
            answer_p.append(float(probs_K[labels.index(decision.answer)]))
            if decision.probs is not None:
                target_K = np.asarray([decision.probs.get(label, 0.0) for label in labels])
                briers.append(float(((probs_K - target_K) ** 2).sum()))
        out = {
            f"{self.prefix}/accuracy": float(np.mean(hits)),
            f"{self.prefix}/answer_prob": float(np.mean(answer_p)),
            f"{self.prefix}/num_examples": float(len(decisions)),
        }
        if briers:
            out[f"{self.prefix}/brier"] = float(np.mean(briers))
        return out


class Decisions(Recipe[DecisionsConfig]):
    """A decision model (one answer token per choice) on hard or soft labels, with Brier score.

    Every choice is scored in one request; held out: accuracy, answer probability, Brier."""

    name = "decisions"

    def workflow(self, cfg: DecisionsConfig) -> Workflow[SupervisedState]:
        start = start_point(cfg, cfg.checkpoint.load_path)
        test = bool(cfg.test_dataset)
        held_out = DecisionEvaluator(choice_prefix=cfg.choice_prefix, limit=cfg.n_eval)
        loss = CrossEntropyLoss() if cfg.labels == "hard" else ChoiceProbabilityLoss(cfg.soft_loss)
        drain: list[Node] = [Await("step_queue", into="step_result"), LogTrainStep()]
        nodes: list[Node] = [
            init_training_client(cfg, start),
            LoadDataset(cfg.dataset, "conversations", split=cfg.dataset_split,
                        convert=decision_row, limit=cfg.n_train_samples, fingerprint=True),
            *optional(test, LoadDataset(cfg.test_dataset or "", "test_conversations",
                                        split=cfg.test_split, convert=decision_row,
                                        fingerprint=True)),
            TokenizeDecisions(labels=cfg.labels, batch_size=cfg.batch_size,
                              num_epochs=cfg.num_epochs, prefix=cfg.choice_prefix),
            Loop("epoch", cfg.num_epochs, "epoch_idx", [
                ShuffleEpoch(seed=cfg.seed),
                Loop("batch", "n_batches", "batch_idx", steps=True, body=[
                    GetBatch(batch_size=cfg.batch_size),
                    *optional(test, When(Every.before_step(cfg.evaluation.every),
                                         [Evaluate(evaluator=held_out)])),
                    submit_train_step(loss, cfg.optimizer),
                    Await("step_queue", into="step_result", keep=1),
                    LogTrainStep(),
                    When(Every(cfg.checkpoint.save_every, "step"), [*drain, SaveCheckpoint()]),
                    *rolling_checkpoints(cfg.checkpoint, drain),
                ]),
            ]),
            *drain,
            *optional(test, Evaluate(evaluator=held_out, report=True)),
            SaveFinal(),
            *registration_nodes(cfg, self.name, start),
        ]  # fmt: skip
        return Workflow(self.name, SupervisedState, nodes=nodes)
