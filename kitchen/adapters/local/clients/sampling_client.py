"""The local SamplingClient: samples from a frozen set of weights (the base, or a LoRA snapshot on the
shared base, or a separately loaded full model) in the backend's shared decode batch."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Generator, Hashable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any

import numpy as np
from tinker import types

from kitchen.adapters.local.clients.executor import SOLO, Executor
from kitchen.adapters.local.distributed.commands import ShadowForward
from kitchen.adapters.local.model.host import LoraSnapshot, ModelHost
from kitchen.adapters.local.model.images import Expanded, text_only, vision_of
from kitchen.adapters.local.sample.compute_thread import ComputeThread, ScoreJob
from kitchen.adapters.local.sample.decode_batch import SampleJob, first_position
from kitchen.adapters.local.sample.sampling import (
    Generated,
    PromptAsks,
    PromptScores,
    StopRule,
    check_sampling_params,
)
from kitchen.adapters.local.sample.seed_stream import RequestSeeds, SeedStream
from kitchen.adapters.local.train.batching import check_token_ids
from kitchen.adapters.local.train.stability import SequenceRecord, StabilityRecords
from kitchen.engine.errors import BackendError
from kitchen.engine.futures import APIFuture, settle
from kitchen.ports import SampleRequest, SamplingClient
from kitchen.ports.sample_request import check_counts, target_answer, target_ids

_sampler_ids = itertools.count(1)


class LocalSamplingClient(SamplingClient):
    """Samples and scores with one fixed set of weights; requests run in submission order.

    Without `SamplingParams.seed`, each request draws its seed from a stream seeded by the backend
    seed and this sampler's serial number, so a whole run is reproducible; drawn seeds are below
    2**31, as every seed Kitchen draws (docs/resume.md).

    `ranks` computes each call (executor.py): this process, or, in a --nproc N run whose host's base
    is sharded, every rank: rank 0 decodes every request while each other rank runs a forward
    beside each of its decode batch's forwards, or (`spread`) every rank decodes a share of the
    batch's rows (distributed/ranked_executor.py's RankShares); compute_logprobs batches are dealt to
    the ranks (docs/distributed.md).
    """

    streams_tokens = True  # answers sample's on_token (kitchen/serve/openai/generate.py)

    def __init__(
        self,
        host: ModelHost,
        snapshot: LoraSnapshot | None,
        compute: ComputeThread,
        seed: int,
        model_path: str | None = None,
        records: StabilityRecords | None = None,
        *,
        microbatch_tokens: int,
        ranks: Executor = SOLO,
        spread: bool = False,
    ) -> None:
        self.host = host
        self.ranks = ranks
        self._spread = ranks.spread(self) if spread else None
        self.microbatch_tokens = microbatch_tokens  # padded tokens per scoring pass
        self.records = records
        self.snapshot = snapshot
        self.model_path = model_path
        self.sampler_id = f"local-sampler-{next(_sampler_ids)}"
        self._compute = compute
        self._seeds = RequestSeeds(seed, self.sampler_id)
        self._sequence_ids = itertools.count()

    def sample_request(self, request: SampleRequest) -> SampleFuture:
        """`num_samples` continuations. `sequence_ids` names them (the server names them at
        submission); `record_stability_info` keeps a record of each for stable_reinforce;
        `on_token(sample, token, logprob)` sees each token as it is chosen (streaming).
        The SDK's prompt and sample extras as its SampleRequest defines them: the top-k at every
        sampled position at the request's temperature (`topk_sample_logprobs`), the logprobs of
        chosen ids at chosen prompt positions (`target_prompt_logprobs`), and k draws at every
        prompt position (`prompt_alt_tokens_k`, from a stream of their own: the samples are the
        ones the same seed gives without them)."""
        num_samples, targets = request.num_samples, request.target_prompt_logprobs
        seed = self._seeds.draw(request.sampling_params)
        try:
            check_counts(request)
            alt_k = request.prompt_alt_tokens_k
            asks = PromptAsks(
                logprobs=request.include_prompt_logprobs,
                topk=request.topk_prompt_logprobs,
                alt_k=alt_k,
                alt_stream=SeedStream(_alt_seed(seed), self.host.device) if alt_k else None,
            )
            job = self._job(
                request.prompt, num_samples, request.sampling_params, seed, asks, targets
            )
        except BackendError as e:  # bad requests fail their future, as the SDK's do
            failed: Future[types.SampleResponse] = Future()
            failed.set_exception(e)
            return SampleFuture(failed, failed)
        sequence_ids = request.sequence_ids
        if sequence_ids is not None and len(sequence_ids) != num_samples:
            raise BackendError(
                f"sample: {len(sequence_ids)} sequence ids for {num_samples} samples"
            )
        ids = sequence_ids or [
            f"{self.sampler_id}:{next(self._sequence_ids)}" for _ in range(num_samples)
        ]
        job.topk_sample_logprobs = request.topk_sample_logprobs
        job.on_token = request.on_token
        done = self._compute.submit_sample(job)
        record = self.records if request.record_stability_info else None
        return SampleFuture(
            _then(done, lambda out: self._response(out, ids, job.prompt, record, targets)),
            done,
            self._compute.queue_gathered,
        )

    def compute_logprobs(
        self, prompt: types.ModelInput, prompt_logprobs_last_n: int | None = None
    ) -> APIFuture[list[float | None]]:
        """log p(token | prefix) for every prompt token; None for the first (and, with
        `prompt_logprobs_last_n`, for all but the last N). The requests submitted before any of
        them is looked at are scored together (compute_thread.py)."""
        try:
            tokens = self._scored_tokens(prompt)
        except BackendError as e:  # bad requests fail their future, as the SDK's do
            failed: Future[list[float | None]] = Future()
            failed.set_exception(e)
            return APIFuture(failed)
        job = ScoreJob(key=self._weights_key(), tokens=tokens, score=self._score)
        done = self._compute.submit_score(job)
        scored = _then(done, lambda lp: _last_n([None, *lp.tolist()], prompt_logprobs_last_n))
        return ScoreFuture(scored, self._compute.release_scores)

    def get_tokenizer(self) -> Any:
        return self.host.tokenizer

    def get_base_model(self) -> str:
        return self.host.model_name

    def weights(self, merge: bool = True) -> Any:
        return self.host.use_weights(self.snapshot, merge)

    @contextmanager
    def _forward_weights(self) -> Iterator[Any]:
        """The weights for one forward of the decode batch, on the compute thread; in a --nproc N
        run every other rank runs a forward beside it, gathering the same layers (world.py)."""
        with self.weights() as model:  # told once nothing on rank 0 can fail before the call
            self.ranks.tell(ShadowForward(self.host.model_name, self.host.quantization))
            with self.ranks.sharded_call(self.host.base):
                yield model

    def _job(
        self,
        prompt: types.ModelInput,
        num_samples: int,
        params: types.SamplingParams,
        seed: int,
        asks: PromptAsks | None = None,
        targets: types.TensorData | None = None,
    ) -> SampleJob:
        vision = vision_of(self.host.base)
        expanded = self._expand(prompt, "sample: prompt")
        tokens = expanded.tokens
        if not tokens:
            raise BackendError("sample: the prompt is empty; expected at least one token")
        if num_samples < 1:
            raise BackendError(f"sample: num_samples is {num_samples}; expected at least 1")
        check_token_ids(tokens, self.host.vocab_size, "sample: prompt")
        check_sampling_params(params)
        asks = asks or PromptAsks()
        if targets is not None:
            ids_RK = target_ids(targets, len(tokens), self.host.vocab_size)
            asks = PromptAsks(asks.logprobs, asks.topk, ids_RK, asks.alt_k, asks.alt_stream)
        budget = self.host.max_context - len(tokens)
        # A prompt that fills the context can still be scored: the SDK's compute_logprobs is a
        # sample of max_tokens=1 with prompt logprobs, and on-policy distillation asks its teacher
        # to score students' answers that ran to the end of the context. Nothing is sampled then.
        if budget < 0 or (budget == 0 and not asks.any):
            raise BackendError(
                f"sample: the prompt has {len(tokens)} tokens; {self.host.model_name} takes at "
                f"most {self.host.max_context - 1} so one can be sampled "
                f"({self.host.max_context} when only its logprobs are asked for)"
            )
        return SampleJob(
            key=self._weights_key(),
            weights=self._forward_weights,
            prompt=tokens,
            images=expanded if expanded.images else None,
            banned=tuple(sorted(vision.placeholder_ids)) if vision is not None else (),
            num_samples=num_samples,
            params=params,
            rule=StopRule.from_params(params, self.eos_ids()),
            tokenizer=self.host.tokenizer,
            stream=SeedStream(seed, self.host.device),
            max_new=budget if params.max_tokens is None else min(params.max_tokens, budget),
            start=first_position(expanded, vision.merge_size)
            if vision is not None and expanded.images
            else len(tokens),
            spread=self._spread,
            asks=asks,
        )

    def _response(
        self,
        done: tuple[list[Generated], PromptScores],
        ids: list[str],
        prompt: list[int],
        records: StabilityRecords | None,
        targets: types.TensorData | None = None,
    ) -> types.SampleResponse:
        results, scores = done
        sequences = [
            types.SampledSequence(
                stop_reason="stop" if r.stop_reason == "stop" else "length",
                sequence_id=sequence_id,
                tokens_np=np.asarray(r.tokens, dtype=np.int32),
                logprobs_np=np.asarray(r.logprobs, dtype=np.float32),
                _topk_logprobs_list=r.topk,
            )
            for r, sequence_id in zip(results, ids, strict=True)
        ]
        if records is not None:
            shared = tuple(prompt)
            for seq in sequences:
                record = SequenceRecord(shared, tuple(seq.tokens), np.asarray(seq.logprobs_np))
                records.put(seq.sequence_id or "", record)
        prompt_np = None
        if scores.logprobs is not None:
            prompt_np = np.asarray(
                [np.nan if x is None else x for x in scores.logprobs], dtype=np.float32
            )
        alt = None
        if scores.alt_tokens is not None and scores.alt_logprobs is not None:
            alt = types.PromptAltTokens(
                tokens=types.TensorData.from_numpy(scores.alt_tokens),
                logprobs=types.TensorData.from_numpy(scores.alt_logprobs),
            )
        return types.SampleResponse(
            sequences=sequences,
            prompt_logprobs_np=prompt_np,
            _topk_prompt_logprobs_list=scores.topk,
            target_prompt_logprobs=None
            if targets is None or scores.targets is None
            else target_answer(targets, scores.targets),
            prompt_alt_tokens=alt,
        )

    def _weights_key(self) -> Hashable:
        """Identifies the weights this sampler computes with: requests with equal keys batch."""
        return (id(self.host), self.snapshot.snapshot_id if self.snapshot else None)

    def _expand(self, prompt: types.ModelInput, where: str) -> Expanded:
        """The prompt's token ids, and its images on a vision-language model (images.py)."""
        vision = vision_of(self.host.base)
        if vision is None:
            return Expanded(text_only(prompt, self.host.model_name, where), [])
        return vision.expand(prompt, where)

    def _scored_tokens(self, prompt: types.ModelInput) -> list[int] | Expanded:
        expanded = self._expand(prompt, "compute_logprobs: prompt")
        tokens = expanded.tokens
        if not tokens:
            raise BackendError("compute_logprobs: the prompt is empty; expected at least one token")
        check_token_ids(tokens, self.host.vocab_size, "compute_logprobs: prompt")
        if len(tokens) > self.host.max_context:
            raise BackendError(
                f"compute_logprobs: the prompt has {len(tokens)} tokens; "
                f"{self.host.model_name} takes at most {self.host.max_context}"
            )
        return expanded if expanded.images else tokens

    def _score(self, sequences: list[list[int] | Expanded]) -> list[np.ndarray]:
        """Logprobs of every token after the first of each sequence, in shared passes (on the
        compute thread; a scoring pass does not repay merging a snapshot's weights). In a
        --nproc N run every rank scores its deal of the passes (distributed/ranked_executor.py)."""
        return self.ranks.score(self, sequences)

    def eos_ids(self) -> set[int]:
        return model_eos_ids(self.host)


class SampleFuture(APIFuture[types.SampleResponse]):
    """A sample request's future; `cancel()` drops its work from the decode batch at once.
    Looking at it without awaiting queues the requests gathered on event loops (compute_thread.py):
    a loop that blocks on its result must not wait for its own next iteration."""

    def __init__(
        self,
        inner: Future[types.SampleResponse],
        job: Future[Any],
        queue: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__(inner)
        self._job = job
        self._queue = queue

    def done(self) -> bool:
        self._queue()
        return super().done()

    def add_done_callback(self, fn: Callable[[Future[types.SampleResponse]], Any]) -> None:
        self._queue()
        super().add_done_callback(fn)

    def result(self, timeout: float | None = None) -> types.SampleResponse:
        self._queue()
        return super().result(timeout)

    def cancel(self) -> bool:
        return self._job.cancel()


class ScoreFuture(APIFuture[list[float | None]]):
    """A compute_logprobs future: looking at it in any way releases the held score requests
    (compute_thread.py), so the work it stands for runs."""

    def __init__(self, inner: Future[list[float | None]], release: Callable[[], None]) -> None:
        super().__init__(inner)
        self._release = release

    def done(self) -> bool:
        self._release()
        return super().done()

    def add_done_callback(self, fn: Callable[[Future[list[float | None]]], Any]) -> None:
        self._release()
        super().add_done_callback(fn)

    def result(self, timeout: float | None = None) -> list[float | None]:
        self._release()
        return super().result(timeout)

    async def result_async(self, timeout: float | None = None) -> list[float | None]:
        self._release()
        return await super().result_async(timeout)

    def __await__(self) -> Generator[Any, None, list[float | None]]:
        self._release()
        return (yield from super().__await__())


def model_eos_ids(host: ModelHost) -> set[int]:
    """The tokens that end a sample of `host`'s model when `SamplingParams.stop` is None."""
    ids: set[int] = set()
    configured = getattr(host.base.generation_config, "eos_token_id", None)
    for value in (host.tokenizer.eos_token_id, configured):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, list | tuple):
            ids.update(int(v) for v in value)
    return ids


def _alt_seed(seed: int) -> int:
    """The seed of a request's prompt_alt_tokens draws: apart from its samples' stream (one
    64-bit LCG step of the seed, so distinct seeds keep distinct streams)."""
    return (seed % 2**64 * 6364136223846793005 + 1442695040888963407) % 2**64


def _last_n(scored: list[float | None], last_n: int | None) -> list[float | None]:
    """`scored` with every entry but the last `last_n` (and always the first) set to None."""
    if last_n is None:
        return scored
    keep_from = max(1, len(scored) - last_n)
    return [None if i < keep_from else x for i, x in enumerate(scored)]


def _then(future: Future[Any], fn: Callable[[Any], Any]) -> Future[Any]:
    """A future of `fn(result)`, resolved on the thread that resolves `future`."""
    out: Future[Any] = Future()
    future.add_done_callback(lambda f: settle(out, lambda: fn(f.result())))
    return out
