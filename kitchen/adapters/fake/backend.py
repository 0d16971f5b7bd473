"""The fake backend: a deterministic test oracle.

It records every call, the loss_fn of every forward_backward, the policy version (number of optim
steps applied) behind every sample, and counts futures nobody awaited. Its "model" is a rule, not a
network: logprobs rise as updates (optim_step calls) accumulate, so a workflow's loss falls as it should.

The rule is read as a model of one parameter theta that every target logprob equals. A built-in
loss is the local engine's formula (train_core.losses.LOSSES, the one table of loss names) summed
over each datum's positions at lp = theta, and its gradient d(loss)/d(theta) is taken through that
formula; a custom loss's gradient is the sum of its logprobs' gradients. A loss the table lacks, or
a datum without an input its loss needs, is refused as the engine refuses it. The gradients of a
step's forward_backward calls add up, and optim_step reports |sum| (GRAD_NORM_METRIC, as Tinker
defines it: the L2 norm of a 1-vector).

Sampling: the completions are the responder's (temperature does not change them) and every
sampled or prompt token's logprob is theta. The SDK's sampling extras (top-k, target ids' logprobs,
alternative draws) read the distribution this rule makes, in the local engine's shapes
(distribution.py).

Images: a model input may hold image chunks; each is checked as the engine checks it (it decodes,
and its `expected_tokens` is the count the tiny VLM's processor gives, fake/images.py), counted per
call in `images`, and read by the sampler as that many `<|image_pad|>` tokens.
"""

from __future__ import annotations

import concurrent.futures
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from tinker import types

from kitchen.adapters.fake.distribution import alt_draws, logprobs_RV, prompt_targets, topk_rows
from kitchen.adapters.fake.images import FakeImageProcessor
from kitchen.adapters.fake.tokenizer import FakeTokenizer
from kitchen.engine.errors import BackendError
from kitchen.engine.futures import APIFuture
from kitchen.ports import (
    GRAD_NORM_METRIC,
    BackendSettings,
    CustomLossFn,
    LoraRequest,
    LossRequest,
    SampleRequest,
    SamplingClient,
    TrainingBackend,
    TrainingClient,
)
from kitchen.ports.sample_request import KITCHEN, check_counts, refuse_options
from train_core.losses import LOSSES, OPTIONAL_INPUTS, REQUIRED_INPUTS

T = TypeVar("T")


class TrackedFuture(APIFuture[T]):
    """Remembers whether anyone asked for its result."""

    def __init__(
        self, inner: concurrent.futures.Future[T], label: str = "", events: list[str] | None = None
    ) -> None:
        super().__init__(inner)
        self.awaited = False
        self.label = label
        self._events = events

    def _mark(self) -> None:
        if not self.awaited and self._events is not None:
            self._events.append(f"await {self.label}")
        self.awaited = True

    def result(self, timeout: float | None = None) -> T:
        self._mark()
        return super().result(timeout)

    def __await__(self) -> Any:
        self._mark()
        return super().__await__()


def _logprob(version: int) -> float:
    return -2.0 / (1.0 + 0.25 * version)


def _target_shape(datum: types.Datum) -> tuple[int, ...]:
    """[T], or [T, K] for K targets per position (the engine's logprobs have the same shape)."""
    return tuple(np.shape(datum.loss_fn_inputs["target_tokens"].to_numpy()))


def _loss_and_gradient(
    loss_fn: str, datum: types.Datum, index: int, theta: float, config: Mapping[str, float]
) -> tuple[float, float]:
    """`loss_fn`'s formula summed over the datum's positions with every target logprob theta, and
    its derivative in theta. Inputs are float64, so the fake's numbers are exact enough to compare
    with a formula written out by hand."""
    import torch

    inputs = datum.loss_fn_inputs
    missing = [k for k in REQUIRED_INPUTS[loss_fn] if k not in inputs]
    if missing:
        raise BackendError(f"fake backend: datum {index}: loss_fn {loss_fn!r} needs {missing}")
    used = [
        *REQUIRED_INPUTS[loss_fn],
        *(k for k in OPTIONAL_INPUTS.get(loss_fn, ()) if k in inputs),
    ]
    tensors = {
        k: torch.as_tensor(inputs[k].to_numpy(), dtype=torch.float64).unsqueeze(0) for k in used
    }
    theta_t = torch.tensor(theta, dtype=torch.float64, requires_grad=True)
    lp = theta_t.expand(tensors["target_tokens"].shape)  # [1, T] (or [1, T, K])
    loss = LOSSES[loss_fn](lp, tensors, config).sum()
    loss.backward()
    return float(loss.detach()), float(theta_t.grad) if theta_t.grad is not None else 0.0


@dataclass
class FakeBackend(TrainingBackend):
    name: str = "fake"
    seed: int = 0
    # prompt tokens -> completion text; default: a deterministic short string
    responder: Callable[[list[int]], str] | None = None
    calls: list[str] = field(default_factory=list)
    # calls and awaits interleaved, e.g. "forward_backward#2", "await forward_backward#1"
    events: list[str] = field(default_factory=list)
    loss_fns: list[str] = field(default_factory=list)
    sample_policy_versions: list[int] = field(default_factory=list)
    sample_seeds: list[int | None] = field(default_factory=list)  # SamplingParams.seed per call
    optim_lrs: list[float] = field(default_factory=list)
    futures: list[TrackedFuture[Any]] = field(default_factory=list)
    states: dict[str, int] = field(default_factory=dict)
    tokenizer: FakeTokenizer = field(default_factory=FakeTokenizer)
    # None: a text-only model (get_image_processor answers None, as the engine does for one)
    image_processor: FakeImageProcessor | None = field(default_factory=FakeImageProcessor)
    images: dict[str, int] = field(default_factory=dict)  # call -> image chunks it was given
    closed: bool = False
    fail_on: set[str] = field(default_factory=set)  # method names that raise BackendError

    @property
    def unawaited(self) -> int:
        return sum(1 for f in self.futures if not f.awaited)

    def future(self, value: T) -> TrackedFuture[T]:
        inner: concurrent.futures.Future[T] = concurrent.futures.Future()
        inner.set_result(value)
        label = self.calls[-1] + f"#{self.calls.count(self.calls[-1])}" if self.calls else "?"
        tracked = TrackedFuture(inner, label, self.events)
        self.futures.append(tracked)
        return tracked

    def failed(self, error: Exception) -> TrackedFuture[Any]:
        inner: concurrent.futures.Future[Any] = concurrent.futures.Future()
        inner.set_exception(error)
        tracked: TrackedFuture[Any] = TrackedFuture(inner, self.calls[-1] if self.calls else "?")
        self.futures.append(tracked)
        return tracked

    def record(self, call: str) -> None:
        if call in self.fail_on:
            raise BackendError(f"fake backend: {call} failed (fail_on)")
        self.calls.append(call)
        self.events.append(f"{call}#{self.calls.count(call)}")

    def read_input(self, model_input: types.ModelInput, where: str) -> list[int]:
        """The tokens the model reads for `model_input`: an image chunk, checked as the engine
        checks it, stands as its count of `<|image_pad|>` tokens (module doc)."""
        tokens: list[int] = []
        for c, chunk in enumerate(model_input.chunks):
            if isinstance(chunk, types.EncodedTextChunk):
                tokens += chunk.tokens
                continue
            at = f"fake backend: {where}: chunk {c} ({chunk.type})"
            if not isinstance(chunk, types.ImageChunk):
                raise BackendError(f"{at}: the fake takes text and image chunks only")
            if self.image_processor is None:
                raise BackendError(f"{at}: the model takes no images")
            n = self.image_processor.tokens(chunk, at)
            if chunk.expected_tokens is not None and chunk.expected_tokens != n:
                raise BackendError(
                    f"{at}: expected_tokens is {chunk.expected_tokens}, but the image processor "
                    f"makes {n} tokens of this image"
                )
            call = self.calls[-1] if self.calls else "?"
            self.images[call] = self.images.get(call, 0) + 1
            tokens += [self.tokenizer.special_ids["<|image_pad|>"]] * n
        return tokens

    # TrainingBackend
    def lora_training_client(self, request: LoraRequest) -> FakeTrainingClient:
        self.record("create_lora_training_client")
        return FakeTrainingClient(self, request.base_model, request.rank)

    def create_training_client_from_state(self, path: str) -> FakeTrainingClient:
        self.record("create_training_client_from_state")
        client = FakeTrainingClient(self, "fake", 32)
        client.version = self._state(path)
        return client

    def create_training_client_from_state_with_optimizer(self, path: str) -> FakeTrainingClient:
        self.record("create_training_client_from_state_with_optimizer")
        return self.create_training_client_from_state(path)

    def create_sampling_client(
        self, model_path: str | None = None, base_model: str | None = None
    ) -> FakeSamplingClient:
        self.record("create_sampling_client")
        return FakeSamplingClient(self, self._state(model_path) if model_path else 0)

    def delete_checkpoint(self, path: str) -> TrackedFuture[None]:
        """Forget the checkpoint at `path` (kitchen.ports.CheckpointDeleter): loading it fails
        after, as it does on the service."""
        self.record("delete_checkpoint")
        if self.states.pop(path, None) is None:
            return self.failed(BackendError(f"fake backend: no checkpoint at {path!r} to delete"))
        return self.future(None)

    def close(self) -> None:
        self.closed = True

    def _state(self, path: str) -> int:
        if path not in self.states:
            raise BackendError(f"fake backend: no checkpoint at {path!r}")
        return self.states[path]


class FakeTrainingClient(TrainingClient):
    def __init__(self, backend: FakeBackend, base_model: str, rank: int) -> None:
        self.backend = backend
        self.base_model = base_model
        self.rank = rank
        self.version = 0
        self._counter = itertools.count()
        self._grad = 0.0  # d(loss)/d(theta) accumulated since the last optim_step (module doc)

    def _outputs(
        self, data: list[types.Datum], loss_fn: str, loss_fn_config: Mapping[str, float] | None
    ) -> tuple[types.ForwardBackwardOutput, float]:
        """The output of `loss_fn` on `data`, and its gradient d(loss)/d(theta) (module doc)."""
        if loss_fn not in LOSSES:
            raise BackendError(
                f"fake backend: loss_fn {loss_fn!r} is not one it models; expected one of "
                f"{', '.join(LOSSES)}"
            )
        config = {k: float(v) for k, v in (loss_fn_config or {}).items()}
        loss, grad = 0.0, 0.0
        for i, datum in enumerate(data):
            self.backend.read_input(datum.model_input, f"datum {i}")
            value, d_theta = _loss_and_gradient(loss_fn, datum, i, _logprob(self.version), config)
            loss += value
            grad += d_theta
        output = types.ForwardBackwardOutput(
            loss_fn_output_type="ArrayRecord",
            loss_fn_outputs=self._logprobs(data),
            metrics={"loss:sum": loss},
        )
        return output, grad

    def _logprobs(self, data: list[types.Datum]) -> list[types.LossFnOutput]:
        """Every datum's target logprobs: theta at each position (and each of its targets)."""
        lp = _logprob(self.version)
        return [
            {"logprobs": types.TensorData.from_numpy(np.full(_target_shape(d), lp, np.float32))}
            for d in data
        ]

    def loss_pass(self, request: LossRequest) -> APIFuture[types.ForwardBackwardOutput]:
        self.backend.record("forward_backward" if request.backward else "forward")
        if request.backward:
            self.backend.loss_fns.append(request.loss_fn)
        output, grad = self._outputs(request.data, request.loss_fn, request.loss_fn_config)
        if request.backward:
            self._grad += grad
        return self.backend.future(output)

    def forward_backward_custom(
        self, data: list[types.Datum], loss_fn: CustomLossFn
    ) -> APIFuture[types.ForwardBackwardOutput]:
        import torch

        self.backend.record("forward_backward_custom")
        self.backend.loss_fns.append("custom")
        for i, datum in enumerate(data):
            self.backend.read_input(datum.model_input, f"datum {i}")
        outputs = self._logprobs(data)
        logprobs = [torch.tensor(o["logprobs"].to_numpy(), requires_grad=True) for o in outputs]
        loss, metrics = loss_fn(data, logprobs)
        loss.backward()
        self._grad += sum(float(lp.grad.sum()) for lp in logprobs if lp.grad is not None)
        return self.backend.future(
            types.ForwardBackwardOutput(
                loss_fn_output_type="ArrayRecord",
                loss_fn_outputs=outputs,
                metrics={"loss:sum": float(loss.detach()), **metrics},
            )
        )

    def optim_step(self, adam_params: types.AdamParams) -> APIFuture[types.OptimStepResponse]:
        self.backend.record("optim_step")
        self.backend.optim_lrs.append(adam_params.learning_rate)
        self.version += 1
        grad_norm, self._grad = abs(self._grad), 0.0
        return self.backend.future(types.OptimStepResponse(metrics={GRAD_NORM_METRIC: grad_norm}))

    def _save(self, kind: str, name: str) -> str:
        path = f"fake://{kind}/{name}"
        self.backend.states[path] = self.version
        return path

    def save_state(self, name: str) -> APIFuture[types.SaveWeightsResponse]:
        self.backend.record("save_state")
        return self.backend.future(types.SaveWeightsResponse(path=self._save("state", name)))

    def load_state(self, path: str) -> APIFuture[types.LoadWeightsResponse]:
        self.backend.record("load_state")
        self.version = self.backend._state(path)
        return self.backend.future(types.LoadWeightsResponse(path=path))

    def load_state_with_optimizer(self, path: str) -> APIFuture[types.LoadWeightsResponse]:
        return self.load_state(path)

    def save_weights_for_sampler(self, name: str) -> APIFuture[types.SaveWeightsForSamplerResponse]:
        self.backend.record("save_weights_for_sampler")
        return self.backend.future(
            types.SaveWeightsForSamplerResponse(path=self._save("sampler", name))
        )

    def save_weights_and_get_sampling_client(self) -> FakeSamplingClient:
        self.backend.record("save_weights_and_get_sampling_client")
        return FakeSamplingClient(self.backend, self.version)

    def create_sampling_client(self, model_path: str) -> FakeSamplingClient:
        return self.backend.create_sampling_client(model_path)

    def get_tokenizer(self) -> FakeTokenizer:
        return self.backend.tokenizer

    def get_image_processor(self) -> FakeImageProcessor | None:
        return self.backend.image_processor

    def get_info(self) -> types.GetInfoResponse:
        return types.GetInfoResponse.model_validate(
            {
                "model_data": {"arch": "fake", "model_name": self.base_model},
                "model_id": "fake-0",
                "is_lora": True,
                "lora_rank": self.rank,
                "model_name": self.base_model,
            }
        )


class FakeSamplingClient(SamplingClient):
    def __init__(self, backend: FakeBackend, version: int) -> None:
        self.backend = backend
        self.version = version
        self._ids = itertools.count()
        self._requests = itertools.count()  # seeds the alt draws of unseeded requests

    def _completion(self, prompt_tokens: list[int], index: int) -> list[int]:
        if self.backend.responder is not None:
            text = self.backend.responder(prompt_tokens)
        else:
            text = f"answer {(sum(prompt_tokens) + index + self.backend.seed) % 10}"
        return [*self.backend.tokenizer.encode(text), self.backend.tokenizer.eos_token_id]

    def sample_request(self, request: SampleRequest) -> APIFuture[types.SampleResponse]:
        """The responder's completions, and the extras the request asks for, read from the
        fake's distribution (distribution.py); a bad request fails its future, as the SDK's do."""
        self.backend.record("sample")
        sampling_params = request.sampling_params
        self.backend.sample_seeds.append(sampling_params.seed)
        prompt_tokens = self.backend.read_input(request.prompt, "prompt")
        theta, vocab = _logprob(self.version), self.backend.tokenizer.vocab_size
        serial = next(self._requests)
        try:
            refuse_options(request, "the fake", *KITCHEN)
            check_counts(request)
            targets = (
                None
                if request.target_prompt_logprobs is None
                else prompt_targets(request.target_prompt_logprobs, prompt_tokens, theta, vocab)
            )
            k = request.topk_prompt_logprobs
            topk_prompt = (
                [None, *topk_rows(logprobs_RV(prompt_tokens[1:], theta, vocab), k)]
                if k > 0
                else None
            )
            alt = None
            if request.prompt_alt_tokens_k > 0:
                key = (
                    [self.backend.seed, 0, sampling_params.seed]
                    if sampling_params.seed is not None
                    else [self.backend.seed, 1, serial]
                )
                alt = alt_draws(
                    prompt_tokens,
                    theta,
                    vocab,
                    request.prompt_alt_tokens_k,
                    sampling_params.temperature,
                    key,
                )
        except BackendError as e:
            return self.backend.failed(e)
        sequences = []
        for i in range(request.num_samples):
            self.backend.sample_policy_versions.append(self.version)
            tokens = self._completion(prompt_tokens, i)
            stop: types.StopReason = "stop"
            if sampling_params.max_tokens is not None and len(tokens) > sampling_params.max_tokens:
                tokens, stop = tokens[: sampling_params.max_tokens], "length"
            sequences.append(
                types.SampledSequence(
                    stop_reason=stop,
                    sequence_id=f"fake-{self.version}-{next(self._ids)}",
                    _tokens_list=tokens,
                    _logprobs_list=[theta] * len(tokens),
                    _topk_logprobs_list=topk_rows(
                        logprobs_RV(tokens, theta, vocab), request.topk_sample_logprobs
                    )
                    if request.topk_sample_logprobs > 0
                    else None,
                )
            )
        prompt_lp = (
            [None] + [theta] * (len(prompt_tokens) - 1) if request.include_prompt_logprobs else None
        )
        return self.backend.future(
            types.SampleResponse(
                sequences=sequences,
                _prompt_logprobs_list=prompt_lp,
                _topk_prompt_logprobs_list=topk_prompt,
                target_prompt_logprobs=targets,
                prompt_alt_tokens=alt,
            )
        )

    def compute_logprobs(self, prompt: types.ModelInput) -> APIFuture[list[float | None]]:
        self.backend.record("compute_logprobs")
        n = len(self.backend.read_input(prompt, "prompt"))
        return self.backend.future([None] + [_logprob(self.version)] * (n - 1))

    def get_tokenizer(self) -> FakeTokenizer:
        return self.backend.tokenizer


def create_fake_backend(settings: BackendSettings) -> FakeBackend:
    return FakeBackend(seed=settings.seed)
