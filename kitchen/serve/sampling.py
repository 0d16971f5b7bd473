"""Sampling requests: which SampleRequest features the local engine serves, and submission."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tinker import types

from kitchen.engine.futures import APIFuture
from kitchen.serve.errors import UserError
from kitchen.serve.requests import RequestRecord
from kitchen.serve.wire import mask_prompt_logprobs


@dataclass
class SamplerEntry:
    """A sampling session: the engine sampler, its base model, the path it was made from."""

    sampler: Any  # LocalSamplingClient
    base_model: str
    model_path: str | None
    session_id: str | None = None  # set when a session registers it; None for one-off samplers


def check_sample_request(request: types.SampleRequest) -> None:
    """Refuse, at submission, what the local engine cannot do (the SDK then fails at once)."""
    if request.num_samples < 1:
        raise UserError(f"num_samples is {request.num_samples}; expected at least 1")
    for name in ("topk_prompt_logprobs", "topk_sample_logprobs", "prompt_alt_tokens_k"):
        if getattr(request, name) < 0:
            raise UserError(f"sample: {name} is {getattr(request, name)}; expected 0 or more")
    targets = request.target_prompt_logprobs
    rows = request.prompt.length - 1
    if targets is not None and (targets.shape is None or targets.shape[:1] != [rows]):
        raise UserError(
            f"sample: target_prompt_logprobs has shape {targets.shape}; expected [{rows}, K] "
            f"(len(prompt) - 1 rows)"
        )
    last_n = request.prompt_logprobs_last_n
    if last_n is not None and (last_n < 1 or last_n >= request.prompt.length):
        raise UserError(
            f"prompt_logprobs_last_n is {last_n}; expected 1 to {request.prompt.length - 1}"
        )


def submit_sample(
    sampler: Any, request: types.SampleRequest, sequence_ids: list[str], record: RequestRecord
) -> APIFuture[types.SampleResponse]:
    """Hand the request to the engine; `record` can then cancel it (cancel_future, session end)."""
    # Only what the request asks for: a sampler without these (vLLM's) serves every other request.
    asked = {
        "topk_sample_logprobs": request.topk_sample_logprobs,
        "target_prompt_logprobs": _tensor_data(request.target_prompt_logprobs),
        "prompt_alt_tokens_k": request.prompt_alt_tokens_k,
    }
    future = sampler.sample(
        request.prompt,
        request.num_samples,
        request.sampling_params,
        include_prompt_logprobs=bool(request.prompt_logprobs),
        topk_prompt_logprobs=request.topk_prompt_logprobs,
        record_stability_info=bool(request.record_stability_info),
        sequence_ids=sequence_ids,
        **{name: value for name, value in asked.items() if value is not None and value != 0},
    )
    record.cancel_work = future.cancel
    last_n = request.prompt_logprobs_last_n
    if last_n is not None:
        return future.map(lambda response: mask_prompt_logprobs(response, last_n))  # type: ignore[no-any-return]
    return future  # type: ignore[no-any-return]


def _tensor_data(model: Any) -> types.TensorData | None:
    """The request's TensorData (its pydantic wire model) as the SDK's numpy-backed one."""
    if model is None:
        return None
    return types.TensorData(
        data=model.data,
        dtype=model.dtype,
        shape=model.shape,
        sparse_crow_indices=model.sparse_crow_indices,
        sparse_col_indices=model.sparse_col_indices,
    )


def check_provenance_session(data: list[types.Datum], session_id: str) -> None:
    """Provenance works within one session (the service's rule): refuse a sequence sampled in
    another session rather than train on records its owner may already have released."""
    for i, datum in enumerate(data):
        for span in datum.loss_fn_input_spans or []:
            if not span.sequence_id.startswith(f"{session_id}:"):
                raise UserError(
                    f"datum {i}: provenance names sequence {span.sequence_id!r}, which was not "
                    f"sampled in this session ({session_id}); sample and train in one session"
                )
