"""One Evaluate stage over train_core's evaluator protocol (train_core/evaluation/evaluator.py):
the evaluator computes held-out metrics from a client of the current weights and the state fields
it names; this stage picks the client and owns where the metrics go (the report switch)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kitchen.engine.graph import Every, Node, When
from kitchen.engine.stage import Context, Metrics
from kitchen.workflows.common.naming import name_by_default
from train_core.evaluation.evaluator import Evaluator

# crucible_kitchen's eval_results keys: a held-out metric also under its bare name (test/nll -> nll;
# DPO's pairwise accuracy is its accuracy).
SEED_KEYS = {
    "accuracy": "accuracy",
    "pairwise_accuracy": "accuracy",
    "f1": "f1",
    "precision": "precision",
    "recall": "recall",
    "nll": "nll",
}


def seed_keys(metrics: dict[str, float]) -> dict[str, float]:
    out = {}
    for key, value in metrics.items():
        prefix, _, leaf = key.rpartition("/")
        if prefix == "test" and leaf in SEED_KEYS:
            out[SEED_KEYS[leaf]] = value
    return out


@dataclass(frozen=True, kw_only=True)
class Evaluate:
    """Run `evaluator` on the current weights.

    Inside a training loop (`report=False`) the metrics go to `into` ("eval_metrics": a pipelined
    step submitted next carries them into its own record, so they describe the weights before
    that step; None: returned as this step's metrics, for loops that are not pipelined). At the
    end of a run (`report=True`) they are merged into `eval_results` (what the model registry
    records) and logged at the current step.

    The client: the training client for a "training" evaluator; for a "sampling" one, the
    sampling client in the state field `sampler` when given (e.g. RL's `sampling_client`, already
    on the current weights), else a fresh snapshot of the training client's weights.
    """

    evaluator: Evaluator
    report: bool = False
    into: str | None = "eval_metrics"
    sampler: str | None = None
    name: str = field(default="", repr=False)
    phase: ClassVar[str] = "evaluation"

    def __post_init__(self) -> None:
        name_by_default(self, f"evaluate_{self.evaluator.name}")

    @property
    def _client_field(self) -> str:
        if self.evaluator.client == "sampling" and self.sampler:
            return self.sampler
        return "training_client"

    @property
    def reads(self) -> frozenset[str]:
        merged = {"eval_results"} if self.report else ({self.into} if self.into else set())
        return frozenset({self._client_field, *self.evaluator.inputs} | merged)

    @property
    def writes(self) -> frozenset[str]:
        if self.report:
            return frozenset({"eval_results"})
        return frozenset({self.into} if self.into else ())

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        state = ctx.state
        client = getattr(state, self._client_field)
        if self.evaluator.client == "sampling" and not self.sampler:
            client = client.save_weights_and_get_sampling_client()
        inputs = {name: getattr(state, name) for name in self.evaluator.inputs}
        metrics = await self.evaluator(client, **inputs)
        if not metrics:
            return None
        if self.report:
            state.eval_results = {**state.eval_results, **metrics, **seed_keys(metrics)}
            return {"step": state.step, **metrics}
        if self.into is None:
            return metrics
        # merged, not replaced: several evaluators due before the same step share its record
        setattr(state, self.into, {**getattr(state, self.into), **metrics})
        return None


@dataclass(frozen=True)
class Scheduled:
    """An evaluator with its own cadence: run before steps 0, every, 2*every, ... (0 = only at
    the end of the run), as tinker-cookbook's evaluators beside its "infrequent" ones."""

    evaluator: Evaluator
    every: int
    at_end: bool = True
    name: str = ""  # the stage is evaluate_{name}; default: the evaluator's name

    @property
    def stage_name(self) -> str:
        return f"evaluate_{self.name or self.evaluator.name}"


def scheduled_evaluations(scheduled: Sequence[Scheduled]) -> list[Node]:
    """One pre-step When per scheduled evaluator, inside a training loop; their metrics merge into
    the next step's record under each evaluator's own prefix."""
    names = [s.stage_name for s in scheduled]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise ValueError(f"scheduled evaluators: two share the stage name {clash[0]!r}")
    return [
        When(Every.before_step(s.every), [Evaluate(evaluator=s.evaluator, name=s.stage_name)])
        for s in scheduled
        if s.every > 0
    ]


def final_evaluations(scheduled: Sequence[Scheduled]) -> list[Node]:
    """The scheduled evaluators that also report at the end of the run (into eval_results)."""
    return [
        Evaluate(evaluator=s.evaluator, report=True, name=f"{s.stage_name}_final")
        for s in scheduled
        if s.at_end
    ]
