"""Sampling requests: which SampleRequest features the local engine serves, and submission."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tinker import types

from kitchen.engine.futures import APIFuture
from kitchen.serve.errors import UserError
from kitchen.serve.wire import mask_prompt_logprobs


@dataclass
class SamplerEntry:
    """A sampling session: the engine sampler, its base model, the path it was made from."""

    sampler: Any  # LocalSamplingClient
    base_model: str
    model_path: str | None


def check_sample_request(request: types.SampleRequest) -> None:
    """Refuse, at submission, what the local engine cannot do (the SDK then fails at once)."""
    if request.num_samples < 1:
        raise UserError(f"num_samples is {request.num_samples}; expected at least 1")
    unsupported = {
        "topk_sample_logprobs": request.topk_sample_logprobs,
        "target_prompt_logprobs": request.target_prompt_logprobs is not None,
        "prompt_alt_tokens_k": request.prompt_alt_tokens_k,
    }
    for name, value in unsupported.items():
        if value:
            raise UserError(f"sample: {name} is not supported by the local engine")
    last_n = request.prompt_logprobs_last_n
    if last_n is not None and (last_n < 1 or last_n >= request.prompt.length):
        raise UserError(
            f"prompt_logprobs_last_n is {last_n}; expected 1 to {request.prompt.length - 1}"
        )


def submit_sample(sampler: Any, request: types.SampleRequest) -> APIFuture[types.SampleResponse]:
    future: APIFuture[types.SampleResponse] = sampler.sample(
        request.prompt,
        request.num_samples,
        request.sampling_params,
        include_prompt_logprobs=bool(request.prompt_logprobs),
        topk_prompt_logprobs=request.topk_prompt_logprobs,
    )
    last_n = request.prompt_logprobs_last_n
    if last_n is not None:
        return future.map(lambda response: mask_prompt_logprobs(response, last_n))
    return future
