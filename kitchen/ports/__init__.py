"""Ports: the interfaces adapters implement. The training ports are the subset of the Tinker SDK's
client surface that recipes use, with the SDK's own types, so the tinker adapter is thin and the
local engine is a drop-in. Where every adapter would restate an SDK signature (sample, forward,
forward_backward, create_lora_training_client), the port states it once: an adapter subclasses the
port and answers the call's arguments as one request value (sample_request, loss_pass,
lora_training_client).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar, runtime_checkable

from kitchen.engine.futures import APIFuture

if TYPE_CHECKING:  # the SDK's types load torch when it is installed; `kitchen --help` must not
    from tinker import types

# optim_step's gradient-norm metric, under the hosted Tinker service's key (docs/servers.md): the L2
# norm, before grad_clip_norm clips it, over the trained parameters, of the gradient accumulated
# since the last optim_step, i.e. of the sum of the forward_backward losses, which Tinker defines as
# weighted sums over tokens and data (never means). The ":mean" suffix is Tinker's reduction tag
# (how its workers combine the value), not a mean over tokens.
GRAD_NORM_METRIC = "unclipped_grad_l2:mean"

# (data, per-datum target logprobs as torch tensors) -> (scalar loss tensor, metrics); same shape as
# the SDK's CustomLossFnV1. Typed loosely so this module never imports torch.
CustomLossFn: TypeAlias = "Callable[[list[types.Datum], list[Any]], tuple[Any, dict[str, float]]]"


@dataclass(frozen=True)
class SampleRequest:
    """SamplingClient.sample's arguments, its defaults filled in, as one value."""

    prompt: types.ModelInput
    num_samples: int
    sampling_params: types.SamplingParams
    include_prompt_logprobs: bool
    topk_prompt_logprobs: int
    topk_sample_logprobs: int
    target_prompt_logprobs: types.TensorData | None
    prompt_alt_tokens_k: int
    record_stability_info: bool
    sequence_ids: list[str] | None
    on_token: Callable[[int, int, float], None] | None


FutureT = TypeVar("FutureT", covariant=True)


class SampleAnswers(Protocol[FutureT]):
    """A sampler by the futures its `sample_request` returns: SamplingClient.sample's self type,
    so that a sampler's own future type is what a caller gets back."""

    def sample_request(self, request: SampleRequest) -> FutureT: ...


@runtime_checkable
class SamplingClient(Protocol):
    """The SDK's SampleRequest extras, as its SamplingClient.sample names them: every prompt
    token's logprob (`include_prompt_logprobs`), the top k at every prompt position
    (`topk_prompt_logprobs`) and at every sampled one (`topk_sample_logprobs`), the logprobs of
    chosen ids at chosen prompt positions (`target_prompt_logprobs`, int64 [len(prompt) - 1, K],
    -1 for none; answered float32 in the same layout), and k draws at every prompt position after
    the first at the request's temperature (`prompt_alt_tokens_k`). The last three are keywords
    here (the SDK also takes them by position), and so are Kitchen's own options after them:
    `record_stability_info` (keep a record of each sample for stable_reinforce), `sequence_ids`
    (the samples' names) and `on_token(sample, token, logprob)` (see each token as it is
    chosen). A sampler that lacks one fails a request that sets it.

    A sampler that subclasses this port inherits sample, the signature stated here once, and
    answers its arguments as one SampleRequest in `sample_request`."""

    def sample(
        self: SampleAnswers[FutureT],
        prompt: types.ModelInput,
        num_samples: int,
        sampling_params: types.SamplingParams,
        include_prompt_logprobs: bool = False,
        topk_prompt_logprobs: int = 0,
        *,
        topk_sample_logprobs: int = 0,
        target_prompt_logprobs: types.TensorData | None = None,
        prompt_alt_tokens_k: int = 0,
        record_stability_info: bool = False,
        sequence_ids: list[str] | None = None,
        on_token: Callable[[int, int, float], None] | None = None,
    ) -> FutureT:
        request = SampleRequest(
            prompt,
            num_samples,
            sampling_params,
            include_prompt_logprobs,
            topk_prompt_logprobs,
            topk_sample_logprobs,
            target_prompt_logprobs,
            prompt_alt_tokens_k,
            record_stability_info,
            sequence_ids,
            on_token,
        )
        return self.sample_request(request)

    def sample_request(self, request: SampleRequest) -> APIFuture[types.SampleResponse]: ...

    def compute_logprobs(self, prompt: types.ModelInput) -> APIFuture[list[float | None]]: ...

    def get_tokenizer(self) -> Any: ...


@dataclass(frozen=True)
class LossRequest:
    """forward's and forward_backward's arguments as one value; `backward`: forward_backward's."""

    data: list[types.Datum]
    loss_fn: types.LossFnType
    loss_fn_config: Mapping[str, float] | None
    backward: bool


@runtime_checkable
class TrainingClient(Protocol):
    """A client that subclasses this port inherits forward and forward_backward, the SDK's
    signature stated here, and answers both as one LossRequest in `loss_pass`."""

    def forward(
        self,
        data: list[types.Datum],
        loss_fn: types.LossFnType,
        loss_fn_config: Mapping[str, float] | None = None,
    ) -> APIFuture[types.ForwardBackwardOutput]:
        """Loss and logprobs without gradients."""
        return self.loss_pass(LossRequest(data, loss_fn, loss_fn_config, backward=False))

    def forward_backward(
        self,
        data: list[types.Datum],
        loss_fn: types.LossFnType,
        loss_fn_config: Mapping[str, float] | None = None,
    ) -> APIFuture[types.ForwardBackwardOutput]:
        """Loss, logprobs, and gradients added to those already accumulated."""
        return self.loss_pass(LossRequest(data, loss_fn, loss_fn_config, backward=True))

    def loss_pass(self, request: LossRequest) -> APIFuture[types.ForwardBackwardOutput]: ...

    def forward_backward_custom(
        self, data: list[types.Datum], loss_fn: CustomLossFn
    ) -> APIFuture[types.ForwardBackwardOutput]: ...

    def optim_step(self, adam_params: types.AdamParams) -> APIFuture[types.OptimStepResponse]: ...

    def save_state(self, name: str) -> APIFuture[types.SaveWeightsResponse]: ...

    def load_state(self, path: str) -> APIFuture[types.LoadWeightsResponse]: ...

    def load_state_with_optimizer(self, path: str) -> APIFuture[types.LoadWeightsResponse]: ...

    def save_weights_for_sampler(
        self, name: str
    ) -> APIFuture[types.SaveWeightsForSamplerResponse]: ...

    def save_weights_and_get_sampling_client(self) -> SamplingClient: ...

    def create_sampling_client(self, model_path: str) -> SamplingClient: ...

    def get_tokenizer(self) -> Any: ...

    def get_info(self) -> types.GetInfoResponse: ...


@runtime_checkable
class ImageProcessorSource(Protocol):
    """A training client that can hand out its model's image processor (the object a vision
    renderer sizes image chunks with: `get_number_of_image_patches`, `merge_size`); None when the
    model takes no images. Not part of the Tinker SDK's client: tinker-cookbook loads the processor
    by model name, which only the backend can resolve here (a local folder, a tiny model)."""

    def get_image_processor(self) -> Any: ...


@runtime_checkable
class CheckpointDeleter(Protocol):
    """A backend that deletes a checkpoint it saved, named by the path save_state (or
    save_weights_for_sampler) returned: the Tinker SDK's `RestClient.delete_checkpoint_from_tinker_path`.
    Not part of TrainingBackend, so a backend without it stays one: a checkpoint on this machine's
    disk is deleted without the backend (train_core.checkpoint.delete_state), one elsewhere is
    left to the service's own expiry. The future fails (BackendError) when nothing is there."""

    def delete_checkpoint(self, path: str) -> APIFuture[None]: ...


@dataclass
class BackendSettings:
    """What a backend needs to know about the run; built by the CLI / `kitchen.run` from the config."""

    log_dir: Path | None = None  # where local checkpoints live (`<log_dir>/checkpoints/`)
    seed: int = 0
    device: str = "auto"  # local engine: auto | cpu | cuda
    dtype: str = "auto"  # local engine: auto (bf16 autocast where native) | float32 | bfloat16
    base_url: str | None = None  # tinker: service address (else TINKER_BASE_URL / default)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LoraRequest:
    """create_lora_training_client's arguments, its defaults filled in, as one value."""

    base_model: str
    rank: int
    seed: int | None
    train_mlp: bool
    train_attn: bool
    train_unembed: bool
    train_vision: bool
    user_metadata: dict[str, str] | None


ClientT = TypeVar("ClientT", covariant=True)


class LoraClients(Protocol[ClientT]):
    """A backend by the clients its `lora_training_client` makes: create_lora_training_client's
    self type, so that a backend's own client type is what a caller gets back."""

    def lora_training_client(self, request: LoraRequest) -> ClientT: ...


@runtime_checkable
class TrainingBackend(Protocol):
    """A ServiceClient-shaped factory of training and sampling clients. A backend that subclasses
    it inherits create_lora_training_client, the SDK's signature stated here once, and answers
    its arguments as one LoraRequest in `lora_training_client`."""

    name: str

    def create_lora_training_client(
        self: LoraClients[ClientT],
        base_model: str,
        rank: int = 32,
        seed: int | None = None,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
        train_vision: bool = False,
        user_metadata: dict[str, str] | None = None,
    ) -> ClientT:
        request = LoraRequest(
            base_model,
            rank,
            seed,
            train_mlp,
            train_attn,
            train_unembed,
            train_vision,
            user_metadata,
        )
        return self.lora_training_client(request)

    def lora_training_client(self, request: LoraRequest) -> TrainingClient: ...

    def create_training_client_from_state(self, path: str) -> TrainingClient: ...

    def create_training_client_from_state_with_optimizer(self, path: str) -> TrainingClient: ...

    def create_sampling_client(
        self, model_path: str | None = None, base_model: str | None = None
    ) -> SamplingClient: ...

    def close(self) -> None: ...


@runtime_checkable
class DatasetStore(Protocol):
    """Rows by name: `bundled:NAME`, a Hugging Face hub name, or a local JSONL/parquet/arrow path."""

    name: str

    def load(self, source: str, split: str = "train") -> Sequence[dict[str, Any]]: ...


@runtime_checkable
class MetricsSink(Protocol):
    def log(self, metrics: Mapping[str, float | int | str], step: int) -> None: ...

    def close(self) -> None: ...
