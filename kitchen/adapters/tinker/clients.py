"""Kitchen's TrainingClient / SamplingClient ports over the Tinker SDK's clients.

Thin: each method forwards to the SDK and wraps its future (kitchen.adapters.tinker.futures). The
SDK keeps its own retries, request ordering and pipelining; the raw SDK client is `.sdk`. sample,
forward and forward_backward are the ports' (kitchen.ports states each signature once): a client
hands the SDK the request they make.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from tinker import types

from kitchen.adapters.tinker.futures import wait, wrap
from kitchen.adapters.tinker.tokenizers import load_image_processor, load_tokenizer
from kitchen.engine.futures import APIFuture
from kitchen.ports import CustomLossFn, LossRequest, SampleRequest, SamplingClient, TrainingClient
from kitchen.ports.sample_request import KITCHEN, refuse_options, sdk_arguments

if TYPE_CHECKING:
    from kitchen.adapters.tinker.backend import TinkerBackend


class TinkerSamplingClient(SamplingClient):
    """A sampler on the service: fixed weights (a snapshot, a saved path, or the base model)."""

    def __init__(self, sdk: Any, backend: TinkerBackend) -> None:
        self.sdk = sdk
        self._backend = backend

    def sample_request(self, request: SampleRequest) -> APIFuture[types.SampleResponse]:
        def submit() -> Any:
            refuse_options(request, "tinker", *KITCHEN)  # the local engine's options
            return self.sdk.sample(**sdk_arguments(request))

        return wrap(submit, "sample", self._backend.api_key)

    def compute_logprobs(self, prompt: types.ModelInput) -> APIFuture[list[float | None]]:
        return wrap(
            lambda: self.sdk.compute_logprobs(prompt), "compute_logprobs", self._backend.api_key
        )

    def get_base_model(self) -> str:
        return str(self.sdk.get_base_model())

    def get_tokenizer(self) -> Any:
        return load_tokenizer(self.get_base_model(), None, self.sdk.get_tokenizer)


class TinkerTrainingClient(TrainingClient):
    """A LoRA model being trained on the service. Requests run in submission order there, so
    callers may queue forward_backward and optim_step for batch N+1 before awaiting batch N."""

    def __init__(self, sdk: Any, backend: TinkerBackend) -> None:
        self.sdk = sdk
        self._backend = backend
        self._key = backend.api_key

    @property
    def model_id(self) -> str:
        return str(self.sdk.model_id)

    def loss_pass(self, request: LossRequest) -> APIFuture[types.ForwardBackwardOutput]:
        name = "forward_backward" if request.backward else "forward"
        call = getattr(self.sdk, name)
        return wrap(
            lambda: call(request.data, request.loss_fn, request.loss_fn_config), name, self._key
        )

    def forward_backward_custom(
        self, data: list[types.Datum], loss_fn: CustomLossFn
    ) -> APIFuture[types.ForwardBackwardOutput]:
        # The SDK runs the loss here, on logprobs from a forward pass, and sends its gradient back.
        return wrap(
            lambda: self.sdk.forward_backward_custom(data, loss_fn),
            "forward_backward_custom",
            self._key,
        )

    def optim_step(self, adam_params: types.AdamParams) -> APIFuture[types.OptimStepResponse]:
        return wrap(lambda: self.sdk.optim_step(adam_params), "optim_step", self._key)

    def save_state(self, name: str) -> APIFuture[types.SaveWeightsResponse]:
        """Weights + optimizer; the returned `tinker://` path resumes training."""
        return wrap(lambda: self.sdk.save_state(name), "save_state", self._key)

    def load_state(self, path: str) -> APIFuture[types.LoadWeightsResponse]:
        return wrap(lambda: self._load(path, optimizer=False), "load_state", self._key)

    def load_state_with_optimizer(self, path: str) -> APIFuture[types.LoadWeightsResponse]:
        return wrap(
            lambda: self._load(path, optimizer=True), "load_state_with_optimizer", self._key
        )

    def _load(self, path: str, optimizer: bool) -> Any:
        # SDK 0.38.0 deprecates loading onto a live client (it logs an error each call) in favour
        # of creating a new client from the checkpoint; the request itself is still served.
        impl = getattr(self.sdk, "_load_state_impl", None)
        if impl is not None:
            return impl(path, optimizer=optimizer, weights_access_token=None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            load = self.sdk.load_state_with_optimizer if optimizer else self.sdk.load_state
            return load(path)

    def save_weights_for_sampler(self, name: str) -> APIFuture[types.SaveWeightsForSamplerResponse]:
        return wrap(
            lambda: self.sdk.save_weights_for_sampler(name), "save_weights_for_sampler", self._key
        )

    def save_weights_and_get_sampling_client(self) -> TinkerSamplingClient:
        """A sampler on the weights as of every request queued so far."""
        sdk = wait(
            self.sdk.save_weights_and_get_sampling_client,
            "save_weights_and_get_sampling_client",
            self._key,
        )
        return TinkerSamplingClient(sdk, self._backend)

    def create_sampling_client(self, model_path: str) -> TinkerSamplingClient:
        sdk = wait(
            lambda: self.sdk.create_sampling_client(model_path), "create_sampling_client", self._key
        )
        return TinkerSamplingClient(sdk, self._backend)

    def create_reference_sampling_client(self) -> TinkerSamplingClient:
        """The base model's sampler (reference logprobs for DPO / KL penalties)."""
        return self._backend.create_sampling_client(
            base_model=self.get_info().model_data.model_name
        )

    def get_tokenizer(self) -> Any:
        info = self.get_info()
        name = info.model_data.model_name or info.model_name or ""
        return load_tokenizer(name, info.model_data.tokenizer_id, self.sdk.get_tokenizer)

    def get_image_processor(self) -> Any:
        """The model's image processor (renderers size image chunks with it); None for a
        text-only model."""
        info = self.get_info()
        return load_image_processor(info.model_data.model_name or info.model_name or "")

    def get_info(self) -> types.GetInfoResponse:
        info: types.GetInfoResponse = self.sdk.get_info()
        return info
