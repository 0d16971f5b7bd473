"""The SamplingClient of `--sampler vllm`: Tinker's sample and compute_logprobs on a vLLM server.

Each client samples one set of weights: the base model, or a LoRA snapshot that vLLM loaded under
a name of its own. A snapshot's adapter is dropped from vLLM (and its folder removed) once no
client holds it. Prompts are scored (compute_logprobs, prompt logprobs) by `scorer`, the local
engine's sampler on the same weights (completions.py says why).
"""

from __future__ import annotations

import concurrent.futures
import itertools
from collections.abc import Collection
from typing import Any

import numpy as np
from tinker import types

from kitchen.adapters.local.sample.seed_stream import RequestSeeds
from kitchen.adapters.vllm.completions import check_honoured, completion_body, sample_sequences
from kitchen.adapters.vllm.pool import ServerPool
from kitchen.engine.errors import BackendError
from kitchen.engine.futures import APIFuture, gather
from kitchen.ports import SampleRequest, SamplingClient
from kitchen.ports.sample_request import refuse_options

_sampler_ids = itertools.count(1)
# SamplingClient's options that vLLM's completions cannot answer; a request that sets one fails.
NOT_TAKEN = ("topk_sample_logprobs", "target_prompt_logprobs", "prompt_alt_tokens_k", "on_token")


class VllmSamplingClient(SamplingClient):
    """Samples `model` (a name vLLM serves) with Tinker's meaning (completions.py).

    Without `SamplingParams.seed`, each request draws its seed from a stream seeded by the backend
    seed and this sampler's serial number, as the local sampler does."""

    def __init__(
        self,
        pool: ServerPool,
        model: str,
        *,
        base_model: str,
        tokenizer: Any,
        eos_ids: Collection[int],
        vocab_size: int,
        max_context: int,
        seed: int,
        scorer: Any,
        model_path: str | None = None,
        records: Any = None,
    ) -> None:
        self.pool = pool
        self.scorer = scorer  # a SamplingClient on the same weights, for prompt logprobs
        self.model = model
        self.base_model = base_model
        self.tokenizer = tokenizer
        self._eos = frozenset(eos_ids)
        self.vocab_size = vocab_size
        self.max_context = max_context
        self.model_path = model_path
        self.records = records  # StabilityRecords of the local engine, for stable_reinforce
        self.sampler_id = f"vllm-sampler-{next(_sampler_ids)}"
        self._seeds = RequestSeeds(seed, self.sampler_id)
        self._sequence_ids = itertools.count()

    def sample_request(self, request: SampleRequest) -> VllmSampleFuture:
        prompt, num_samples, sequence_ids = (
            request.prompt,
            request.num_samples,
            request.sequence_ids,
        )
        sampling_params = request.sampling_params
        seed = self._seeds.draw(sampling_params)
        try:
            refuse_options(request, "--sampler vllm", *NOT_TAKEN)
            tokens = self._prompt(prompt, "sample")
            if num_samples < 1:
                raise BackendError(f"sample: num_samples is {num_samples}; expected at least 1")
            check_honoured(sampling_params)
            budget = self.max_context - len(tokens)
            if budget < 1:
                raise BackendError(
                    f"sample: the prompt has {len(tokens)} tokens; {self.base_model} takes at "
                    f"most {self.max_context - 1} with --sampler vllm"
                )
            if sequence_ids is not None and len(sequence_ids) != num_samples:
                raise BackendError(
                    f"sample: {len(sequence_ids)} sequence ids for {num_samples} samples"
                )
            max_new = budget if sampling_params.max_tokens is None else sampling_params.max_tokens
            body = completion_body(
                model=self.model,
                prompt=tokens,
                num_samples=num_samples,
                params=sampling_params,
                seed=seed,
                # vLLM samples at least one token; Tinker's max_tokens=0 asks for none.
                max_tokens=max(1, min(max_new, budget)),
                eos_ids=self._eos,
            )
        except BackendError as e:
            return VllmSampleFuture(APIFuture.failed(e))
        ids = sequence_ids or [
            f"{self.sampler_id}:{next(self._sequence_ids)}" for _ in range(num_samples)
        ]
        posted = self.pool.post("/v1/completions", body)
        sampled = APIFuture(posted)
        scored = None
        if request.include_prompt_logprobs or request.topk_prompt_logprobs > 0:
            scored = self.scorer.sample(
                prompt,
                1,
                types.SamplingParams(max_tokens=0),
                include_prompt_logprobs=request.include_prompt_logprobs,
                topk_prompt_logprobs=request.topk_prompt_logprobs,
            )
        records = self.records if request.record_stability_info else None
        empty = sampling_params.max_tokens == 0

        def respond(done: tuple[Any, types.SampleResponse | None]) -> types.SampleResponse:
            answer, prompt_side = done
            sequences = sample_sequences(answer, ids)
            if empty:
                sequences = [_emptied(seq) for seq in sequences]
            if records is not None:
                _record(records, tokens, sequences)
            return types.SampleResponse(
                sequences=sequences,
                prompt_logprobs_np=prompt_side.prompt_logprobs_np if prompt_side else None,
                _topk_prompt_logprobs_list=prompt_side.topk_prompt_logprobs
                if prompt_side
                else None,
            )

        # Both halves settle before respond runs, on whichever thread settles last: the HTTP
        # loop never waits on the engine.
        halves = gather(sampled, scored if scored is not None else APIFuture.completed(None))
        return VllmSampleFuture(halves.map(respond), posted)

    def compute_logprobs(self, prompt: types.ModelInput) -> APIFuture[list[float | None]]:
        """log p(token | prefix) for every prompt token (None for the first), from the scorer."""
        return self.scorer.compute_logprobs(prompt)  # type: ignore[no-any-return]

    def eos_ids(self) -> set[int]:
        """The tokens that end a sample when `SamplingParams.stop` is None."""
        return set(self._eos)

    def get_tokenizer(self) -> Any:
        return self.tokenizer

    def get_base_model(self) -> str:
        return self.base_model

    def _prompt(self, prompt: types.ModelInput, what: str) -> list[int]:
        try:
            tokens = prompt.to_ints()
        except ValueError as e:
            raise BackendError(f"{what}: --sampler vllm takes text-only prompts ({e})") from e
        if not tokens:
            raise BackendError(f"{what}: the prompt is empty; expected at least one token")
        bad = [t for t in tokens if not 0 <= t < self.vocab_size]
        if bad:
            raise BackendError(
                f"{what}: prompt token {bad[0]} is outside the vocabulary (0..{self.vocab_size - 1})"
            )
        return tokens


class VllmSampleFuture(APIFuture[types.SampleResponse]):
    """A sample request's future; `cancel()` abandons its HTTP request (`kitchen serve` cancels
    the work of a request its client dropped), and vLLM aborts a request whose client left."""

    def __init__(
        self,
        response: APIFuture[types.SampleResponse],
        request: concurrent.futures.Future[Any] | None = None,
    ) -> None:
        super().__init__(response._inner, response._sources)
        self._request = request

    def cancel(self) -> bool:
        return self._request.cancel() if self._request is not None else False


def _emptied(seq: types.SampledSequence) -> types.SampledSequence:
    return types.SampledSequence(
        stop_reason="length",
        sequence_id=seq.sequence_id,
        tokens_np=np.zeros(0, dtype=np.int32),
        logprobs_np=np.zeros(0, dtype=np.float32),
    )


def _record(records: Any, prompt: list[int], sequences: list[types.SampledSequence]) -> None:
    from kitchen.adapters.local.train.stability import SequenceRecord

    shared = tuple(prompt)
    for seq in sequences:
        records.put(
            seq.sequence_id or "",
            SequenceRecord(shared, tuple(seq.tokens), np.asarray(seq.logprobs_np)),
        )
