"""The one way a train step submits an update, and the pipelined train step of SFT and DPO.

`Update` is every train step's update (SFT, DPO, RL sync and async, streaming RL): its
forward_backward passes, then one optim_step, each call and every later wait on its result
charged to its phase of the step that submitted it (`time/forward_backward`,
`time/optim_step`; kitchen/engine/phases.py), also when the wait comes a step later.

`SubmitTrainStep` submits the loss's forward_backward and an optim_step for this batch without
waiting; the step joins `step_queue`, so step N+1 is submitted before step N is awaited
(tinker-cookbook's SL loop). `Await("step_queue", into="step_result")` collects a step and
`LogTrainStep` reports it under its own step number, with the loss's tinker-cookbook keys.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from tinker import types

from kitchen.engine.futures import APIFuture, gather
from kitchen.engine.phases import StepClock
from kitchen.engine.stage import Context, Metrics
from kitchen.workflows.common.config import AdamConfig


@dataclass(frozen=True)
class Updated:
    """What an update's requests returned: each forward_backward pass's output, in the order
    they were submitted, and the optim_step's response."""

    passes: list[types.ForwardBackwardOutput]
    optim: types.OptimStepResponse


class Update:
    """One optimizer update: `forward_backward` once per pass (all queued before any wait),
    then `optim_step`, whose future resolves to every result (`Updated`)."""

    def __init__(self, clock: StepClock, client: Any) -> None:
        self._clock, self._client = clock, client
        self._passes: list[APIFuture[types.ForwardBackwardOutput]] = []

    def forward_backward(
        self, submit: Callable[..., APIFuture[types.ForwardBackwardOutput]], *args: Any
    ) -> None:
        """One pass: `submit(*args)`, the request that returns its output (the client's
        forward_backward, or a loss's own call of it)."""
        self._passes.append(self._clock.request("forward_backward", submit, *args))

    def optim_step(self, params: types.AdamParams) -> APIFuture[Updated]:
        """The update's optim_step; the future of the whole update, waited on as its phases."""
        optim = self._clock.request("optim_step", self._client.optim_step, params)
        results = gather(*self._passes, optim)
        done = results.map(lambda r: Updated(list(r[:-1]), r[-1]))
        return self._clock.track(done, "optim_step")


class StepLoss(Protocol):
    """What a train step trains on, and what it reports; cross entropy and DPO are the two."""

    # State fields `submit` reads besides the batch (e.g. the reference's logprobs).
    reads: ClassVar[frozenset[str]]
    # tinker-cookbook's SL loop reports progress after the step ((step + 1) / total), its DPO
    # loop before it (step / total); each loss keeps its reference's number.
    progress_after_step: ClassVar[bool]

    def submit(
        self, client: Any, batch: list[types.Datum], state: Any
    ) -> APIFuture[types.ForwardBackwardOutput]:
        """Submit forward_backward on the batch; returns its future."""
        ...

    def metrics(
        self, data: list[types.Datum], fb: types.ForwardBackwardOutput, tokenizer: Any
    ) -> Metrics:
        """The step's loss metrics once its forward_backward resolved."""
        ...


@dataclass(frozen=True)
class AdamSettings:
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.0
    grad_clip_norm: float = 0.0

    def params(self, learning_rate: float) -> types.AdamParams:
        """The SDK's AdamParams at this step's (scheduled) learning rate."""
        return types.AdamParams(
            learning_rate=learning_rate,
            beta1=self.beta1,
            beta2=self.beta2,
            eps=self.eps,
            weight_decay=self.weight_decay,
            grad_clip_norm=self.grad_clip_norm,
        )


@dataclass
class SubmittedStep:
    """What a train step needs for its metrics once its update resolves."""

    step: int
    epoch: int
    learning_rate: float
    loss: StepLoss
    data: list[types.Datum]
    eval_metrics: dict[str, float]
    fb: types.ForwardBackwardOutput | None = None
    optim: types.OptimStepResponse | None = None

    def resolved(self, update: Updated) -> SubmittedStep:
        (self.fb,), self.optim = update.passes, update.optim
        return self


@dataclass(frozen=True, kw_only=True)
class SubmitTrainStep:
    """Submit the loss's forward_backward and optim_step at this step's scheduled learning rate;
    the step (with the pre-step `eval_metrics`) joins `step_queue` unawaited."""

    loss: StepLoss
    learning_rate: float
    lr_schedule: str = "linear"
    warmup_steps: int = 0
    adam: AdamSettings = field(default_factory=AdamSettings)
    name: str = "submit_train_step"
    writes: frozenset[str] = frozenset({"step_queue", "eval_metrics"})

    @property
    def reads(self) -> frozenset[str]:
        own = {"training_client", "batch", "total_steps", "eval_metrics", "step_queue", "epoch_idx"}
        return frozenset(own | self.loss.reads)

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.schedules import lr_at

        state, client = ctx.state, ctx.state.training_client
        lr = lr_at(
            state.step, state.total_steps, self.learning_rate, self.lr_schedule, self.warmup_steps
        )
        update = Update(ctx.clock, client)
        update.forward_backward(self.loss.submit, client, state.batch, state)
        submitted = SubmittedStep(
            state.step, state.epoch_idx, lr, self.loss, state.batch, dict(state.eval_metrics)
        )
        step = update.optim_step(self.adam.params(lr)).map(submitted.resolved)
        state.step_queue = [*state.step_queue, step]
        state.eval_metrics = {}
        return None


def submit_train_step(loss: StepLoss, optimizer: AdamConfig) -> SubmitTrainStep:
    """The train step with a config's optimizer section bound: learning rate, schedule, warmup and
    every Adam setting."""
    adam = AdamSettings(
        optimizer.beta1,
        optimizer.beta2,
        optimizer.eps,
        optimizer.weight_decay,
        optimizer.grad_clip_norm,
    )
    return SubmitTrainStep(
        loss=loss,
        learning_rate=optimizer.learning_rate,
        lr_schedule=optimizer.schedule,
        warmup_steps=optimizer.warmup_steps,
        adam=adam,
    )


@dataclass(frozen=True, kw_only=True)
class LogTrainStep:
    """Metrics of the step just awaited, with tinker-cookbook's keys, reported under its own step.
    With `into`, the `summary` metrics (result name -> metric key) of the last step are also kept
    in that state field (DPO's `dpo_metrics`, crucible_kitchen's result)."""

    into: str | None = None
    summary: tuple[tuple[str, str], ...] = ()
    name: str = "log_train_step"
    reads: frozenset[str] = frozenset({"step_result", "tokenizer", "total_steps"})

    @property
    def writes(self) -> frozenset[str]:
        return frozenset({self.into} if self.into else ())

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        done: SubmittedStep | None = ctx.state.step_result
        if done is None or done.fb is None:
            return None
        steps_done = done.step + (1 if done.loss.progress_after_step else 0)
        metrics = {
            "step": done.step,
            "epoch": done.epoch,
            "progress": steps_done / max(ctx.state.total_steps or 1, 1),
            "learning_rate": done.learning_rate,
            **done.loss.metrics(done.data, done.fb, ctx.state.tokenizer),
            **((done.optim.metrics or {}) if done.optim else {}),
            **done.eval_metrics,
        }
        if self.into:
            kept = {name: float(metrics[key]) for name, key in self.summary if key in metrics}
            setattr(ctx.state, self.into, kept)
        return metrics
