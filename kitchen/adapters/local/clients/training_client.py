"""The local TrainingClient: one LoRA adapter on a shared base, or (`lora` None: full fine-tuning) a
private full copy of the model, plus its AdamW state.

Every call returns at once with a future; the work runs on the backend's compute thread in
submission order, so callers can queue forward_backward and optim_step for batch N+1 before
awaiting batch N, as tinker-cookbook's loops do.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import TYPE_CHECKING, Any, TypeVar

from tinker import types

from kitchen.adapters.local.clients.checkpointer import Checkpointer
from kitchen.adapters.local.clients.sampling_client import LocalSamplingClient
from kitchen.adapters.local.clients.training_passes import TrainingPasses
from kitchen.adapters.local.distributed.commands import (
    CloseClient,
    OptimStep,
)
from kitchen.adapters.local.model.host import ModelHost
from kitchen.adapters.local.model.lora import (
    LoraSpec,
    adapter_parameters,
    peft_config,
)
from kitchen.adapters.local.train.memory import ActivationBudget, PaddingTally, peak_gib
from kitchen.adapters.local.train.optimizer import AdamState, adam_step
from kitchen.adapters.local.train.pass_settings import PassSettings
from kitchen.adapters.local.train.stability import with_sampler_logprobs
from kitchen.engine.futures import APIFuture
from kitchen.ports import CustomLossFn, LossRequest, TrainingClient

if TYPE_CHECKING:
    from kitchen.adapters.local.clients.engine import Engine

T = TypeVar("T")
_client_ids = itertools.count(1)


def next_model_id() -> str:
    return f"local-train-{next(_client_ids)}"


class LocalTrainingClient(TrainingClient):
    """A model being trained. `lora` is None for full fine-tuning (then `host` is private to it)."""

    def __init__(
        self,
        engine: Engine,
        host: ModelHost,
        lora: LoraSpec | None,
        seed: int,
        model_id: str | None = None,
    ) -> None:
        self.engine = engine  # the backend that made it, as its clients see it (engine.py)
        self.ranks = engine.ranks  # where each call computes (executor.py)
        self.host = host
        self.lora = lora
        self.seed = seed
        self.model_id = model_id or next_model_id()
        self.adapter: str | None = None
        self._queued: list[Future[Any]] = []  # submitted calls not yet seen done
        self._queue_lock = threading.Lock()
        self._closed = False
        config = None
        if lora is not None:
            self.adapter = self.model_id
            config = peft_config(host.base, lora)
            host.add_adapter(self.adapter, config, seed)
            params = list(adapter_parameters(host.model, self.adapter).values())
        else:
            host.base.requires_grad_(True)
            params = [p for p in host.base.parameters() if p.requires_grad]
        self.adam = AdamState(params)
        self._padding = PaddingTally()  # of the forward_backward calls since the last optim_step
        settings = engine.settings
        pass_settings = PassSettings(
            settings.microbatch_tokens,
            settings.activation_checkpointing,
            settings.packing,
            ActivationBudget(host.device),  # read once, at the first training pass
            self._padding,
        )
        # The loss calls: here, and by command on the ranks > 0 (worker.py).
        self.passes = TrainingPasses(
            host, self.adapter, params, self.ranks, pass_settings, self.model_id
        )
        # Its save and load calls and sampler snapshots: here, and by command on the ranks > 0.
        self.checkpoints = Checkpointer(
            engine, host, self.adapter, config, lora, seed, self.model_id, self.adam
        )

    @property
    def step(self) -> int:
        """Updates (optim_step calls) taken, those of a state loaded with its optimizer included."""
        return self.adam.step

    # -- training ---------------------------------------------------------------------------------

    def loss_pass(self, request: LossRequest) -> APIFuture[types.ForwardBackwardOutput]:
        """forward and forward_backward (the port's): the loss, on the compute thread."""
        data, config = list(request.data), request.loss_fn_config
        return self._submit(self._run_builtin, data, request.loss_fn, config, request.backward)

    def forward_backward_custom(
        self, data: list[types.Datum], loss_fn: CustomLossFn
    ) -> APIFuture[types.ForwardBackwardOutput]:
        """`loss_fn(data, logprobs_per_datum) -> (loss, metrics)` on logprobs with gradients; backprop."""
        return self._submit(self.passes.run_custom, list(data), loss_fn)

    def optim_step(self, adam_params: types.AdamParams) -> APIFuture[types.OptimStepResponse]:
        return self._submit(self._optim_step, adam_params)

    # -- checkpoints ------------------------------------------------------------------------------

    def save_state(self, name: str) -> APIFuture[types.SaveWeightsResponse]:
        """Weights + optimizer to `<checkpoint_root>/weights/<name>`; the path resumes training."""
        return self._submit(self.checkpoints.save_state, name)

    def load_state(self, path: str) -> APIFuture[types.LoadWeightsResponse]:
        """Weights from a save_state folder; the optimizer starts fresh."""
        return self._submit(self.checkpoints.load_state, path, False)

    def load_state_with_optimizer(self, path: str) -> APIFuture[types.LoadWeightsResponse]:
        """Weights and optimizer state: continuing equals never having stopped."""
        return self._submit(self.checkpoints.load_state, path, True)

    def save_weights_for_sampler(self, name: str) -> APIFuture[types.SaveWeightsForSamplerResponse]:
        """Weights only, to `<checkpoint_root>/sampler_weights/<name>`, for create_sampling_client."""
        return self._submit(self.checkpoints.save_sampler, name)

    def save_weights_and_get_sampling_client(self, name: str | None = None) -> LocalSamplingClient:
        """A sampler on the weights as of every call queued so far: an in-memory snapshot, also
        written to `sampler_weights/<name>` when a name is given (as the SDK's named variant)."""
        if name is not None:
            self.save_weights_for_sampler(name)
        return self._submit(self.checkpoints.sampler).result()

    async def save_weights_and_get_sampling_client_async(
        self, name: str | None = None
    ) -> LocalSamplingClient:
        """As save_weights_and_get_sampling_client, without blocking an event loop."""
        if name is not None:
            self.save_weights_for_sampler(name)
        return await self._submit(self.checkpoints.sampler)

    def create_sampling_client(self, model_path: str) -> LocalSamplingClient:
        return self.engine.create_sampling_client(model_path=model_path)

    def create_reference_sampling_client(self) -> LocalSamplingClient:
        """The base model's sampler: with LoRA it shares this client's base weights, adapters off.
        Use it for reference logprobs (DPO, KL penalties) without a second model in memory."""
        return self.engine.create_sampling_client(base_model=self.host.model_name)

    # -- info -------------------------------------------------------------------------------------

    def get_tokenizer(self) -> Any:
        return self.host.tokenizer

    def get_image_processor(self) -> Any:
        """The model's own image processor (renderers size image chunks with it); None for a
        text-only model."""
        from kitchen.adapters.local.model.images import vision_of

        vision = vision_of(self.host.base)
        return vision.processor if vision is not None else None

    @property
    def dtype_name(self) -> str:
        """The compute dtype forward and backward passes run in (weights and Adam state are fp32)."""
        return self.engine.dtype_name

    def get_info(self) -> types.GetInfoResponse:
        name = self.host.model_name
        return types.GetInfoResponse(
            model_data=types.ModelData(
                arch=self.host.base.config.model_type, model_name=name, tokenizer_id=name
            ),
            model_id=self.model_id,
            is_lora=self.lora is not None,
            lora_rank=self.lora.rank if self.lora else None,
            model_name=name,
        )

    def close(self, cancel_queued: bool = False) -> None:
        """Finish queued work (or, `cancel_queued`, only the running call), then free the adapter
        (LoRA) so the shared base stays lean, or the shards of a fully fine-tuned model."""
        with self._queue_lock:
            queued, self._queued = self._queued, []
        if cancel_queued:
            for future in queued:
                future.cancel()  # the running call (if any) finishes
        if not self.engine.compute.on_thread():
            wait(queued)
        if self.adapter is not None:
            self.host.remove_adapter(self.adapter)
        if self.checkpoints.sharded_full:
            self.ranks.release(self.host.base)
        closed, self._closed = self._closed, True  # a server closes it with its session and at exit
        if not closed:
            self.ranks.tell_from(self.engine.compute, CloseClient(self.model_id))

    # -- work run on the engine's compute thread --------------------------------------------------

    def _submit(self, fn: Callable[..., T], *args: Any) -> APIFuture[T]:
        with self._queue_lock:
            future = self.engine.compute.submit_call(lambda: fn(*args))
            self._queued = [f for f in self._queued if not f.done()] + [future]
        return APIFuture(future)

    def _run_builtin(
        self, data: list[types.Datum], loss_fn: str, *rest: Any
    ) -> types.ForwardBackwardOutput:
        """The loss call (TrainingPasses.run_loss), with stable_reinforce's inputs read from the
        sampler's records first: they are rank 0's alone, so the data goes to the other ranks with
        them."""
        if loss_fn == "stable_reinforce":
            data = with_sampler_logprobs(data, self.engine.stability)
        return self.passes.run_loss(data, loss_fn, *rest)

    def _optim_step(self, adam_params: types.AdamParams) -> types.OptimStepResponse:
        """The update of optim_step: here, and by command on the ranks > 0 (worker.py)."""
        self.ranks.tell(OptimStep(self.model_id, adam_params))
        with self.host.lock:
            metrics = adam_step(self.adam.optimizer, adam_params)
        self.adam.step += 1
        metrics = {**metrics, **self._padding.take()}
        if self.ranks.leader:  # a rank > 0's peak goes with its results (World.gather)
            metrics.update(peak_memory(self.host.device))
            metrics.update(self.ranks.take_peaks())
        return types.OptimStepResponse(metrics=metrics)


def peak_memory(device: Any) -> dict[str, float]:
    """`memory/peak_gib`: the most memory torch held allocated on the accelerator `device` since
    the previous optim_step on it (memory.peak_gib); nothing on a CPU."""
    peak = peak_gib(device)
    return {} if peak is None else {"memory/peak_gib": peak}
