"""The training passes of one client: its built-in and custom loss calls on its model, told to
the other ranks first at --nproc N, where every rank runs its deal of them (forward.py does the
math). The client builds one and hands it every loss call; ranks > 0 call it by command."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tinker import types

from kitchen.adapters.local.distributed.commands import Backprop, RunLoss, ScoreData
from kitchen.adapters.local.train.forward import (
    backprop_gradients,
    run_builtin_loss,
    run_custom_loss,
    score_data,
)

if TYPE_CHECKING:
    from kitchen.adapters.local.clients.executor import Executor
    from kitchen.adapters.local.model.host import ModelHost
    from kitchen.adapters.local.train.pass_settings import PassSettings
    from kitchen.ports import CustomLossFn


# One client's passes: equal only to themselves, and no repr of their tensors.
@dataclass(eq=False, repr=False)
class TrainingPasses:
    """The passes of client `model_id` on `host` (through `adapter`; None: full fine-tuning),
    whose gradients land in `params`, run as `settings` say and computed where `ranks` say."""

    host: ModelHost
    adapter: str | None
    params: list[Any]
    ranks: Executor
    settings: PassSettings
    model_id: str

    def run_loss(
        self,
        data: list[types.Datum],
        loss_fn: str,
        config: Mapping[str, float] | None,
        backward: bool,
    ) -> types.ForwardBackwardOutput:
        self.ranks.tell(RunLoss(self.model_id, data, loss_fn, config, backward))
        with self.host.use(self.adapter) as model, self._sharded_call():
            out = run_builtin_loss(model, data, loss_fn, config, backward, self._dealt())
        if backward:
            self._zero_missing_grads()
        return out

    def run_custom(
        self, data: list[types.Datum], loss_fn: CustomLossFn
    ) -> types.ForwardBackwardOutput:
        with self.host.use(self.adapter) as model:
            out = run_custom_loss(
                model,
                data,
                loss_fn,
                self._dealt(),
                # At N > 1 every rank scores and backpropagates its deal; rank 0 runs the loss.
                backprop=self._backprop_everywhere(data) if self.ranks.size > 1 else None,
                score=(lambda: self.score_data(data)) if self.ranks.size > 1 else None,
            )
        self._zero_missing_grads()
        return out

    def score_data(self, data: list[types.Datum]) -> list[Any] | None:
        """Every rank: its deal of scoring a custom loss's data on the sharded base; the logprobs
        per datum on rank 0."""
        self.ranks.tell(ScoreData(self.model_id, data))
        settings = self._dealt()
        with self.host.use(self.adapter) as model, self._sharded_call():
            return score_data(model, data, settings)

    def backprop(self, data: list[types.Datum], grads: list[Any]) -> None:
        self.ranks.tell(Backprop(self.model_id, data, grads))
        settings = self._dealt()
        with self.host.use(self.adapter) as model, self._sharded_call():
            backprop_gradients(model, data, grads, settings)
        self._zero_missing_grads()  # as rank 0 does after its custom call

    def _backprop_everywhere(self, data: list[types.Datum]) -> Callable[[list[Any]], None]:
        """Rank 0's custom loss gradient (per datum) pushed through the model by every rank."""

        def backprop(grads: list[Any]) -> None:
            self.backprop(data, [None if g is None else g.numpy() for g in grads])

        return backprop

    def _zero_missing_grads(self) -> None:
        """Positions without a gradient are skipped, so a batch with none (every advantage 0) leaves
        no grad at all; it gets zeros, as a backward through the whole graph gave, so the next
        optim_step still advances Adam's moments and state for every parameter."""
        import torch

        for p in self.params:  # the optimizer's one group (optimizer.py)
            if p.grad is None:
                p.grad = torch.zeros_like(p)

    def _dealt(self) -> PassSettings:
        """The pass settings of one call, with its deal: LoRA's passes' gradients summed apart (as
        --nproc N sums them: the same numbers at any N); full fine-tuning's straight into the sum
        (apart, they would need the model's size again), by FSDP's reduce-scatters at N > 1."""
        return self.settings.dealt(self.ranks.deal(self.params, full=self.adapter is None))

    def _sharded_call(self) -> contextlib.AbstractContextManager[None]:
        """Every rank's span of one training call on the base."""
        return self.ranks.sharded_call(self.host.base)
