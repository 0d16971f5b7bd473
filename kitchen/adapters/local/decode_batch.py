"""The running decode batch: every sample request in flight on the same weights decodes together,
whichever prompt, group, env, stage or `kitchen serve` client it came from. It runs on the backend's
compute thread (compute_thread.py), which admits requests and steps it between other calls.

One step over many rows costs far less than a step per request (SmolLM2 in bf16 on 2 CPU cores:
82 ms for 32 rows against 51 ms for 8), so requests join the running batch between decode steps
and leave it as soon as they finish. New requests are prefilled once per distinct prompt, the
distinct prompts that arrive together in one left-padded forward, the KV cache repeated for their
samples and concatenated to the batch's; caches of different lengths are left-padded and the
padding masked, with explicit position ids, so every row still sees exactly its own prompt + sample
and its logprobs equal a full forward pass over them (fp32: < 1e-5). Each request keeps its own stop
rule, max_tokens, sampling params and random stream.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from concurrent.futures import Future
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tinker import types

from kitchen.adapters.local.batching import image_arguments, left_padded, to_device
from kitchen.adapters.local.images import Expanded, mrope_positions, vision_of
from kitchen.adapters.local.sampling import (
    Generated,
    PromptScores,
    StopRule,
    choose_tokens,
    prompt_scores,
    sampled_logprobs,
)
from kitchen.adapters.local.seed_stream import SeedStream

# Padded tokens one prefill forward takes: different prompts arriving together are prefilled in one
# forward up to this many (4 RL prompts of 35-38 tokens x 8 samples, SmolLM2 in bf16 on 2 cores:
# 470 ms to the first tokens as 4 forwards, 140 ms as one).
PREFILL_TOKENS = 2048
Weights = Callable[[], AbstractContextManager[Any]]  # enters the model with the right weights


@dataclass
class SampleJob:
    """One sample request: `num_samples` continuations of `prompt`."""

    key: Hashable  # identifies the weights; jobs with equal keys share a batch
    weights: Weights
    prompt: list[int]
    num_samples: int
    params: types.SamplingParams
    rule: StopRule
    tokenizer: Any
    stream: SeedStream  # the request's random numbers, from its seed
    max_new: int
    # The prompt's images (a vision-language model): it is prefilled alone, through the whole
    # model, and its rows decode at M-RoPE positions (images.py).
    images: Expanded | None = None
    # Token ids never sampled: a vision-language model's image placeholders, which a later
    # forward would take for an image's place. The chosen token's logprob is still the model's
    # (what the trainer computes for it), not renormalised over the allowed tokens.
    banned: tuple[int, ...] = ()
    prompt_logprobs: bool = False
    topk_prompt_logprobs: int = 0
    # Called on the compute thread as each token is chosen: (sample index, token, logprob).
    # Streaming servers forward it; it must be quick and never raise.
    on_token: Callable[[int, int, float], None] | None = None
    future: Future[tuple[list[Generated], PromptScores]] = field(default_factory=Future)
    results: list[Generated] = field(default_factory=list)
    scores: PromptScores = field(default_factory=PromptScores)
    live: int = 0  # rows still decoding


@dataclass
class _Row:
    job: SampleJob
    sample: int  # index into job.results
    position: int  # position id of the token fed next
    token: int  # the token fed next


class DecodeBatch:
    """The rows decoding together and their KV cache; used only on the compute thread."""

    def __init__(self) -> None:
        self._rows: list[_Row] = []
        self._cache: Any = None
        self._pads: list[int] = []  # left padding of each row in the cache
        self.steps = 0  # decode steps run, for benchmarks
        self.prefills = 0  # prefill forwards run
        self.rows_stepped = 0  # sum of batch sizes over those steps

    @property
    def rows(self) -> list[_Row]:
        return self._rows

    def jobs(self) -> list[SampleJob]:
        """The requests with rows in the batch."""
        return list({id(r.job): r.job for r in self._rows}.values())

    def admit(self, jobs: list[SampleJob]) -> None:
        """Prefill `jobs` and add their rows; a request whose prefill fails fails alone."""
        for groups in _prefill_batches(jobs):
            try:
                self._prefill(groups)
            except BaseException as e:  # the requests fail; the batch goes on
                for job in (job for group in groups for job in group):
                    if not job.future.done():
                        job.future.set_exception(e)

    def step(self) -> None:
        """One decode step over every row; on an error every request in the batch fails."""
        try:
            self._step()
        except BaseException as e:
            for job in self.jobs():
                if not job.future.done():
                    job.future.set_exception(e)
            self._rows, self._cache, self._pads = [], None, []

    def drop_cancelled(self) -> None:
        """Rows of cancelled requests (a client gone or a cancel_future) leave the batch now."""
        kept = [i for i, r in enumerate(self._rows) if not r.job.future.cancelled()]
        self._keep(kept)

    def _prefill(self, groups: list[list[SampleJob]]) -> None:
        """One forward over the distinct prompts of `groups` (each group shares one prompt),
        left-padded to the longest; each job then draws its first tokens from its prompt's row."""
        import torch

        first = groups[0][0]
        want_all = first.prompt_logprobs or first.topk_prompt_logprobs > 0  # then a group alone
        max_new = max(j.max_new for group in groups for j in group)
        lengths = [len(group[0].prompt) for group in groups]
        width = max(lengths)
        shift = 0  # M-RoPE: a row's position runs `shift` behind its cache length
        with first.weights() as model, torch.inference_mode():
            device = _device(model)
            ids_GL, kwargs = left_padded([group[0].prompt for group in groups], device)
            if first.images is not None:  # a prompt with images is prefilled alone, unpadded
                kwargs, shift = _image_kwargs(model, first.images, device)
            out = model(
                input_ids=ids_GL,
                use_cache=max_new > 0,
                logits_to_keep=0 if want_all else 1,
                **kwargs,
            )
        self.prefills += 1
        segments: list[tuple[SampleJob, list[_Row], Any]] = []
        prompt_rows: list[int] = []  # the prompt row of each segment
        for i, group in enumerate(groups):
            logits = out.logits[i]
            for job in group:
                job.results = [Generated() for _ in range(job.num_samples)]
                if want_all:
                    job.scores = prompt_scores(
                        logits, ids_GL[i], job.prompt_logprobs, job.topk_prompt_logprobs
                    )
                if job.max_new <= 0:
                    _resolve(job)
                    continue
                rows = [_Row(job, n, len(job.prompt) + shift, 0) for n in range(job.num_samples)]
                segments.append((job, rows, logits[-1:].float().expand(job.num_samples, -1)))
                prompt_rows.append(i)
        kept: list[_Row] = []
        source: list[int] = []  # the prompt row of each kept row
        for going, i in zip(self._advance(segments, step=0), prompt_rows, strict=True):
            kept += going
            source += [i] * len(going)
        if kept:
            cache = out.cache
            cache.batch_select_indices(torch.tensor(source, device=device))
            self._join(kept, cache, width, [width - lengths[i] for i in source])

    def _advance(
        self, segments: list[tuple[SampleJob, list[_Row], Any]], step: int
    ) -> list[list[_Row]]:
        """Choose the next token of each row of every (job, rows, logits_NV) segment and record it;
        per segment, the rows that go on decoding. Segments with the same temperature, top-k and
        top-p choose in one set of ops over their rows (each row's uniform number from its own
        request's stream), and all choices come to the host in one copy: on an accelerator each op
        is a launch and each read waits for the queue (32 one-sample requests made ~10 launches
        and 2-3 reads each per step)."""
        import torch

        if not segments:
            return []
        by_rule: dict[tuple[float, int, float], list[int]] = {}
        for i, (job, _, _) in enumerate(segments):
            p = job.params
            by_rule.setdefault((p.temperature, p.top_k, p.top_p), []).append(i)
        order = [i for members in by_rule.values() for i in members]
        picks = []
        for members in by_rule.values():
            params = segments[members[0]][0].params
            logits_NV = torch.cat([segments[i][2] for i in members])
            banned = any(segments[i][0].banned for i in members)
            allowed_NV = (
                torch.cat([_allowed(segments[i][0], segments[i][2]) for i in members])
                if banned
                else logits_NV
            )
            u_N1 = None
            if params.temperature > 0:
                u_N1 = torch.cat(
                    [
                        segments[i][0].stream.uniform((len(segments[i][1]), 1), logits_NV.device)
                        for i in members
                    ]
                )
            next_N = choose_tokens(allowed_NV, params, u_N1)
            chosen_N = sampled_logprobs(logits_NV, next_N, params.temperature)
            picks.append(torch.stack([next_N.double(), chosen_N.double()]))  # ids < 2**53: exact
        tokens, logprobs = torch.cat(picks, dim=1).tolist()
        going: list[list[_Row]] = [[] for _ in segments]
        start = 0
        for i in order:
            job, rows, _ = segments[i]
            end = start + len(rows)
            chosen = [int(t) for t in tokens[start:end]]
            going[i] = self._record(job, rows, chosen, logprobs[start:end], step)
            start = end
        return going

    def _record(
        self, job: SampleJob, rows: list[_Row], tokens: list[int], logprobs: list[float], step: int
    ) -> list[_Row]:
        kept = []
        for row, token, logprob in zip(rows, tokens, logprobs, strict=True):
            result = job.results[row.sample]
            result.tokens.append(token)
            result.logprobs.append(logprob)
            if job.on_token is not None:
                job.on_token(row.sample, token, logprob)
            if job.rule.stops(result.tokens, job.tokenizer):
                result.stop_reason = "stop"
            elif len(result.tokens) < job.max_new:
                row.token = token
                kept.append(row)
        job.live += len(kept) - (len(rows) if step else 0)
        if job.live == 0:
            _resolve(job)
        return kept

    def _join(self, rows: list[_Row], cache: Any, length: int, pads: list[int]) -> None:
        """Append `rows` (cache of `length` positions, the first `pads` of each row padding) to the
        batch, left-padding the shorter side."""
        import torch

        if not self._rows:
            self._rows, self._cache, self._pads = rows, cache, pads
            return
        current = self._cache.get_seq_length()
        total = max(current, length)
        for mine, theirs in zip(self._cache.layers, cache.layers, strict=True):
            for name in ("keys", "values"):
                a, b = getattr(mine, name), getattr(theirs, name)
                setattr(mine, name, torch.cat([_left_pad(a, total), _left_pad(b, total)], dim=0))
        self._pads = [p + total - current for p in self._pads] + [p + total - length for p in pads]
        self._rows += rows

    def _step(self) -> None:
        import torch

        rows = self._rows
        job = rows[0].job
        ids_N1 = np.asarray([[r.token] for r in rows], dtype=np.int64)
        with job.weights() as model, torch.inference_mode():
            device = _device(model)
            kwargs: dict[str, Any] = {}
            # Unpadded text batches keep SDPA's mask-free causal path; rows with images decode at
            # their M-RoPE positions, which are not their cache lengths.
            if any(self._pads) or any(r.job.images is not None for r in rows):
                mask_NL = np.ones((len(rows), self._cache.get_seq_length() + 1), dtype=np.int64)
                for i, pad in enumerate(self._pads):
                    mask_NL[i, :pad] = 0
                position_N1 = np.asarray([[r.position] for r in rows], dtype=np.int64)
                ids, mask, position = to_device(device, ids_N1, mask_NL, position_N1)
                kwargs = {"attention_mask": mask, "position_ids": position}
            else:
                (ids,) = to_device(device, ids_N1)
            out = model(input_ids=ids, cache=self._cache, use_cache=True, **kwargs)
        self.steps += 1
        self.rows_stepped += len(rows)
        logits_NV = out.logits[:, -1, :].float()
        segments: list[tuple[SampleJob, list[_Row], Any]] = []
        start = 0
        while start < len(rows):  # a job's rows are contiguous: they join together, in order
            job = rows[start].job
            end = start
            while end < len(rows) and rows[end].job is job:
                end += 1
            for r in rows[start:end]:
                r.position += 1
            segments.append((job, rows[start:end], logits_NV[start:end]))
            start = end
        going = {id(r) for kept_rows in self._advance(segments, step=1) for r in kept_rows}
        self._keep([i for i, r in enumerate(rows) if id(r) in going])

    def _keep(self, kept: list[int]) -> None:
        """Keep only the rows at indices `kept` (and their cache rows)."""
        import torch

        rows = self._rows
        if len(kept) == len(rows):
            return
        if not kept:
            self._rows, self._cache, self._pads = [], None, []
            return
        self._cache.batch_select_indices(torch.tensor(kept, device=_device_of(self._cache)))
        self._rows = [rows[i] for i in kept]
        self._pads = [self._pads[i] for i in kept]
        trim = min(self._pads)
        if trim:  # columns every row pads: drop them
            for layer in self._cache.layers:
                layer.keys, layer.values = layer.keys[:, :, trim:], layer.values[:, :, trim:]
            self._pads = [p - trim for p in self._pads]


def _allowed(job: SampleJob, logits_NV: Any) -> Any:
    """`logits_NV` with the job's banned tokens at -inf."""
    if not job.banned:
        return logits_NV
    out = logits_NV.clone()
    out[:, list(job.banned)] = float("-inf")
    return out


def _image_kwargs(model: Any, images: Expanded, device: Any) -> tuple[dict[str, Any], int]:
    """The forward's image arguments for one prompt with images, and how far its next position
    (M-RoPE) runs behind its length."""
    vision = vision_of(model)
    assert vision is not None  # the sampler expanded the images with it
    kwargs = image_arguments([images], len(images.tokens), vision, device)
    last = int(mrope_positions(images, vision.merge_size).max())
    return kwargs, last + 1 - len(images.tokens)


def _prefill_batches(jobs: list[SampleJob]) -> list[list[list[SampleJob]]]:
    """Jobs grouped by prompt, and the groups into prefill forwards of at most PREFILL_TOKENS
    padded tokens; a job scoring its prompt is a forward of its own (it keeps every position's
    logits)."""
    groups: dict[Any, list[SampleJob]] = {}
    batches: list[list[list[SampleJob]]] = []
    for job in jobs:
        if job.prompt_logprobs or job.topk_prompt_logprobs > 0 or job.images is not None:
            batches.append([[job]])
        else:
            groups.setdefault(tuple(job.prompt), []).append(job)
    batch: list[list[SampleJob]] = []
    for group in sorted(groups.values(), key=lambda g: len(g[0].prompt)):
        width = len(group[0].prompt)  # the longest so far: groups come shortest first
        if batch and (len(batch) + 1) * width > PREFILL_TOKENS:
            batches.append(batch)
            batch = []
        batch.append(group)
    return batches + ([batch] if batch else [])


def _left_pad(x: Any, length: int) -> Any:
    import torch.nn.functional as F

    return F.pad(x, (0, 0, length - x.shape[-2], 0)) if x.shape[-2] < length else x


def _resolve(job: SampleJob) -> None:
    if not job.future.cancelled():  # a cancelled request's result goes nowhere
        job.future.set_result((job.results, job.scores))


def _device_of(cache: Any) -> Any:
    return cache.layers[0].keys.device


def _device(model: Any) -> Any:
    return next(model.parameters()).device
