"""One Evaluate stage over train_core's evaluator protocol (train_core/evaluation/evaluator.py):
the evaluator computes held-out metrics from a client of the current weights and the state fields
it names; this stage picks the client and owns where the metrics go (the report switch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from kitchen.engine.stage import Context, Metrics
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
        if not self.name:
            object.__setattr__(self, "name", f"evaluate_{self.evaluator.name}")

    @property
    def _client_field(self) -> str:
        if self.evaluator.client == "sampling" and self.sampler:
            return self.sampler
        return "training_client"

    @property
    def reads(self) -> frozenset[str]:
        merged = {"eval_results"} if self.report else set()
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
        setattr(state, self.into, metrics)
        return None
