"""The running decode batch: every sample request in flight on the same weights decodes together,
whichever prompt, group, env, stage or `kitchen serve` client it came from. It runs on the backend's
compute thread (compute_thread.py), which admits requests and steps it between other calls.

One step over many rows costs far less than a step per request (docs/adapters.md has the dated
measurements), so requests join the running batch between decode steps and leave it as soon as
they finish. New requests are prefilled once per distinct prompt, the
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
from typing import Any, Protocol, assert_never

import numpy as np
from tinker import types

from kitchen.adapters.local.model.images import Expanded, mrope_positions, vision_of
from kitchen.adapters.local.sample.sampling import (
    Generated,
    PromptAsks,
    PromptScores,
    StopRule,
    choose_tokens,
    prompt_scores,
    sampled_logprobs,
    sampled_topk,
)
from kitchen.adapters.local.sample.seed_stream import SeedStream
from kitchen.adapters.local.train.batching import image_arguments, left_padded, to_device

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
    start: int  # the position id of the first sampled token (past the prompt)
    # The prompt's images (a vision-language model): it is prefilled alone, through the whole
    # model, and its rows decode at M-RoPE positions (images.py).
    images: Expanded | None = None
    # Token ids never sampled: a vision-language model's image placeholders, which a later
    # forward would take for an image's place. The chosen token's logprob is still the model's
    # (what the trainer computes for it), not renormalised over the allowed tokens.
    banned: tuple[int, ...] = ()
    asks: PromptAsks = field(default_factory=PromptAsks)  # what it asks of its prompt
    topk_sample_logprobs: int = 0  # the top-k at every sampled position
    # Called on the compute thread as each token is chosen: (sample index, token, logprob).
    # Streaming servers forward it; it must be quick and never raise.
    on_token: Callable[[int, int, float], None] | None = None
    future: Future[tuple[list[Generated], PromptScores]] = field(default_factory=Future)
    results: list[Generated] = field(default_factory=list)
    scores: PromptScores = field(default_factory=PromptScores)
    live: int = 0  # rows still decoding
    spread: Spread | None = None  # the ranks the batch is spread over (a --nproc N run)


@dataclass
class _Row:
    job: SampleJob
    sample: int  # index into job.results
    position: int  # position id of the token fed next
    token: int  # the token fed next


class Spread(Protocol):
    """The ranks of a --nproc N run that spreads sampling (sampling_client.py): every rank keeps a
    share of the decode batch's rows and their KV cache, and each forward runs on all of them."""

    size: int

    def tick(self, own: Callable[[Any], Any], ops: list[list[Op]]) -> list[Any]:
        """One forward on every rank at once: `own(model)` on rank 0, `ops` on the others (rank
        r's are `ops[r - 1]`, CacheRows.run); each rank's logits, on rank 0's device."""
        ...

    def settle(self, ops: list[list[Op]]) -> None:
        """The other ranks run `ops` now, without a forward: rows that left the batch free their
        cache there before the batch's next forward, which may come long after."""
        ...


@dataclass(frozen=True)
class Prefill:
    """A forward over new prompts (CacheRows.prefill)."""

    prompts: list[list[int]]
    use_cache: bool
    want_all: bool = False
    images: Expanded | None = None


@dataclass(frozen=True)
class Join:
    """The last prefill's rows join the cache (CacheRows.join)."""

    source: list[int]
    length: int


@dataclass(frozen=True)
class Step:
    """One decode step of every row (CacheRows.step)."""

    ids_N1: np.ndarray
    mask_NL: np.ndarray | None
    position_N1: np.ndarray


@dataclass(frozen=True)
class Keep:
    """Only some rows stay (CacheRows.keep)."""

    kept: list[int]
    trim: int


Op = Prefill | Join | Step | Keep  # what a share's CacheRows does next


class CacheRows:
    """The KV cache of one share of the decode batch's rows, and the forwards over it. The rows
    themselves (their requests, stop rules, random streams, results) are rank 0's (DecodeBatch),
    which tells each share what to do with its cache; in a --nproc N run that spreads sampling,
    ranks > 0 each keep the cache of their share and run what rank 0 sends them (`run`)."""

    def __init__(self) -> None:
        self.cache: Any = None
        self._fresh: Any = None  # the last prefill's cache, until `join` takes its rows

    def run(self, model: Any, ops: list[Op]) -> Any:
        """Every op in turn, on `model`; the logits of the forward among them. With none, a
        one-token forward whose output is dropped (on a sharded base every rank forwards in
        step), unless `model` is None: the ops then only drop rows."""
        logits = None
        for op in ops:
            out = self.apply(model, op)
            logits = logits if out is None else out
        if logits is None and model is not None:
            filler_forward(model)
        return logits

    def apply(self, model: Any, op: Op) -> Any:
        """One op on this share's cache; the logits of a forward (None for the others)."""
        match op:
            case Prefill():
                return self.prefill(model, op.prompts, op.use_cache, op.want_all, op.images)
            case Step():
                return self.step(model, op.ids_N1, op.mask_NL, op.position_N1)
            case Join():
                self.join(op.source, op.length)
            case Keep():
                self.keep(op.kept, op.trim)
            case _:
                assert_never(op)
        return None

    def prefill(
        self,
        model: Any,
        prompts: list[list[int]],
        use_cache: bool,
        want_all: bool = False,
        images: Expanded | None = None,
    ) -> Any:
        """One forward over `prompts`, left-padded to the longest; its cache waits for `join`.
        The logits at the last position [G, V], or (`want_all`) at every position [G, L, V]."""
        device = _device(model)
        ids_GL, kwargs = left_padded(prompts, device)
        if images is not None:  # a prompt with images is prefilled alone, unpadded
            kwargs = _image_kwargs(model, images, device)
        out = model(
            input_ids=ids_GL, use_cache=use_cache, logits_to_keep=0 if want_all else 1, **kwargs
        )
        self._fresh = out.cache if use_cache else None
        return out.logits if want_all else out.logits[:, -1].float()

    def join(self, source: list[int], length: int) -> None:
        """The last prefill's rows `source` (a prompt's row once per sample) join the cache, both
        sides left-padded to `length` positions."""
        import torch

        fresh, self._fresh = self._fresh, None
        fresh.batch_select_indices(torch.tensor(source, device=_device_of(fresh)))
        if self.cache is None:
            self.cache = fresh
            return
        for mine, theirs in zip(self.cache.layers, fresh.layers, strict=True):
            for name in ("keys", "values"):
                a, b = getattr(mine, name), getattr(theirs, name)
                setattr(mine, name, torch.cat([_left_pad(a, length), _left_pad(b, length)], dim=0))

    def step(
        self, model: Any, ids_N1: np.ndarray, mask_NL: np.ndarray | None, position_N1: np.ndarray
    ) -> Any:
        """One decode step: the next token of every row; the logits after it [N, V]."""
        device = _device(model)
        kwargs: dict[str, Any] = {}
        if mask_NL is not None:
            ids, mask, position = to_device(device, ids_N1, mask_NL, position_N1)
            kwargs = {"attention_mask": mask, "position_ids": position}
        else:
            (ids,) = to_device(device, ids_N1)
        out = model(input_ids=ids, cache=self.cache, use_cache=True, **kwargs)
        return out.logits[:, -1, :].float()

    def keep(self, kept: list[int], trim: int) -> None:
        """Keep the rows at indices `kept`, less the first `trim` positions (padding in all)."""
        import torch

        if not kept:
            self.cache = self._fresh = None
            return
        self.cache.batch_select_indices(torch.tensor(kept, device=_device_of(self.cache)))
        if trim:
            for layer in self.cache.layers:
                layer.keys, layer.values = layer.keys[:, :, trim:], layer.values[:, :, trim:]


@dataclass
class _Share:
    """Rank 0's record of one share of the batch: its rows, in cache order."""

    rows: list[_Row] = field(default_factory=list)
    pads: list[int] = field(default_factory=list)  # left padding of each row in the cache
    length: int = 0  # positions in the cache
    cache: CacheRows | None = None  # rank 0's own share's; another rank holds its share's
    ops: list[Op] = field(default_factory=list)  # another rank's: what to do before its forward


class DecodeBatch:
    """The rows decoding together and their KV cache; used only on the compute thread. In a
    --nproc N run that spreads sampling (a request's `spread`), the rows are dealt to the ranks by
    prompt, each rank a share with its own cache, and every forward (a prefill, a decode step)
    runs on all the shares at once; rank 0 keeps every row's request and chooses every token."""

    def __init__(self) -> None:
        self._shares = [_Share(cache=CacheRows())]
        self._spread: Spread | None = None  # the running batch's ranks, when it spreads
        self.steps = 0  # decode steps run, for benchmarks
        self.prefills = 0  # prefill forwards run
        self.rows_stepped = 0  # sum of batch sizes over those steps

    @property
    def rows(self) -> list[_Row]:
        return [row for share in self._shares for row in share.rows]

    def jobs(self) -> list[SampleJob]:
        """The requests with rows in the batch."""
        return list({id(r.job): r.job for r in self.rows}.values())

    def admit(self, jobs: list[SampleJob]) -> None:
        """Prefill `jobs` and add their rows; a request whose prefill fails fails alone."""
        if not jobs:
            return
        if not self.rows:
            self._spread = jobs[0].spread
            size = 1 if self._spread is None else self._spread.size
            if len(self._shares) != size:
                self._shares = [self._shares[0]] + [_Share() for _ in range(size - 1)]
        batches_S = [_prefill_batches(dealt) for dealt in self._deal(jobs)]
        for t in range(max(len(batches) for batches in batches_S)):
            tick = [batches[t] if t < len(batches) else [] for batches in batches_S]
            try:
                self._prefill(tick)
            except BaseException as e:  # the requests fail; the batch goes on
                for job in (job for groups in tick for group in groups for job in group):
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
            for share in self._shares:
                self._keep(share, [])
        self._settle()

    def drop_cancelled(self) -> None:
        """Rows of cancelled requests (a client gone or a cancel_future) leave the batch now."""
        for share in self._shares:
            kept = [i for i, r in enumerate(share.rows) if not r.job.future.cancelled()]
            self._keep(share, kept)
        self._settle()

    def _deal(self, jobs: list[SampleJob]) -> list[list[SampleJob]]:
        """`jobs` by share: each prompt's requests to the share with the fewest rows (the first
        of those), a request with images or scoring its prompt to rank 0's (it needs its
        images, or every position's logits)."""
        if len(self._shares) == 1:
            return [jobs]
        rows_S = [len(share.rows) for share in self._shares]
        dealt: list[list[SampleJob]] = [[] for _ in self._shares]
        groups: dict[Any, list[SampleJob]] = {}
        for job in jobs:
            groups.setdefault(id(job) if _alone(job) else tuple(job.prompt), []).append(job)
        for group in groups.values():
            share = 0 if _alone(group[0]) else rows_S.index(min(rows_S))
            dealt[share] += group
            rows_S[share] += sum(job.num_samples for job in group)
        return dealt

    def _prefill(self, tick: list[list[list[SampleJob]]]) -> None:
        """One forward on every share: share s over the distinct prompts of `tick[s]` (each group
        shares one prompt; a share with none runs a filler forward); each job then draws its first
        tokens from its prompt's row."""
        import torch

        ops: list[list[Op]] = []
        for groups in tick:
            if not groups:
                ops.append([])
                continue
            first = groups[0][0]  # a job that scores its prompt is a group alone
            use_cache = max(j.max_new for group in groups for j in group) > 0
            prompts = [group[0].prompt for group in groups]
            ops.append([Prefill(prompts, use_cache, _scores_prompt(first), first.images)])
        logits_S = self._tick(next(g[0][0] for g in tick if g), ops)
        self.prefills += 1
        segments: list[tuple[SampleJob, list[_Row], Any]] = []
        prompt_rows: list[tuple[int, int]] = []  # the share and prompt row of each segment
        for s, groups in enumerate(tick):
            for i, group in enumerate(groups):
                for job in group:
                    job.results = [Generated() for _ in range(job.num_samples)]
                    if _scores_prompt(job):
                        ids_L = torch.tensor(job.prompt, device=logits_S[s].device)
                        job.scores = prompt_scores(
                            logits_S[s][i], ids_L, job.asks, job.params.temperature
                        )
                        last_V = logits_S[s][i, -1].float()
                    else:
                        last_V = logits_S[s][i]
                    if job.max_new <= 0:
                        _resolve(job)
                        continue
                    rows = [_Row(job, n, job.start, 0) for n in range(job.num_samples)]
                    segments.append((job, rows, last_V[None].expand(job.num_samples, -1)))
                    prompt_rows.append((s, i))
        kept: list[list[_Row]] = [[] for _ in tick]
        source: list[list[int]] = [[] for _ in tick]  # the prompt row of each kept row
        for going, (s, i) in zip(self._advance(segments, step=0), prompt_rows, strict=True):
            kept[s] += going
            source[s] += [i] * len(going)
        for share, groups, rows, rows_source in zip(self._shares, tick, kept, source, strict=True):
            if not rows:
                continue
            lengths = [len(group[0].prompt) for group in groups]
            width = max(lengths)
            self._join(share, rows, rows_source, width, [width - lengths[i] for i in rows_source])

    def _tick(self, job: SampleJob, ops: list[list[Op]]) -> list[Any]:
        """One forward on every share (see Spread): each share's logits."""
        import torch

        own = self._shares[0].cache
        assert own is not None
        if self._spread is None:
            with job.weights() as model, torch.inference_mode():
                return [own.run(model, ops[0])]
        remote = []
        for share, share_ops in zip(self._shares[1:], ops[1:], strict=True):
            remote.append(share.ops + share_ops)
            share.ops = []
        return self._spread.tick(lambda model: own.run(model, ops[0]), remote)

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
            job, rows, logits_NV = segments[i]
            end = start + len(rows)
            chosen = [int(t) for t in tokens[start:end]]
            # Read only for requests that ask: the batch's one copy per step stays one otherwise.
            top = (
                sampled_topk(logits_NV, job.params.temperature, job.topk_sample_logprobs)
                if job.topk_sample_logprobs > 0
                else None
            )
            going[i] = self._record(job, rows, chosen, logprobs[start:end], step, top)
            start = end
        return going

    def _record(
        self,
        job: SampleJob,
        rows: list[_Row],
        tokens: list[int],
        logprobs: list[float],
        step: int,
        top: list[list[tuple[int, float]]] | None = None,
    ) -> list[_Row]:
        kept = []
        for n, (row, token, logprob) in enumerate(zip(rows, tokens, logprobs, strict=True)):
            result = job.results[row.sample]
            result.tokens.append(token)
            result.logprobs.append(logprob)
            if top is not None:
                result.topk = [] if result.topk is None else result.topk
                result.topk.append(top[n])
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

    def _join(
        self, share: _Share, rows: list[_Row], source: list[int], length: int, pads: list[int]
    ) -> None:
        """Append `rows` (rows `source` of the last prefill, `length` positions, the first `pads`
        of each row padding) to `share`, left-padding the shorter side."""
        total = max(share.length, length) if share.rows else length
        self._send(share, Join(source, total))
        share.pads = [p + total - share.length for p in share.pads] + [
            p + total - length for p in pads
        ]
        share.rows += rows
        share.length = total

    def _step(self) -> None:
        ops: list[list[Op]] = []
        for share in self._shares:
            rows = share.rows
            if not rows:
                ops.append([])
                continue
            ids_N1 = np.asarray([[r.token] for r in rows], dtype=np.int64)
            position_N1 = np.asarray([[r.position] for r in rows], dtype=np.int64)
            mask_NL = None
            # Unpadded text batches keep SDPA's mask-free causal path; rows with images decode at
            # their M-RoPE positions, which are not their cache lengths.
            if any(share.pads) or any(r.job.images is not None for r in rows):
                mask_NL = np.ones((len(rows), share.length + 1), dtype=np.int64)
                for i, pad in enumerate(share.pads):
                    mask_NL[i, :pad] = 0
            ops.append([Step(ids_N1, mask_NL, position_N1)])
        logits_S = self._tick(self.rows[0].job, ops)
        self.steps += 1
        segments: list[tuple[SampleJob, list[_Row], Any]] = []
        for share, logits_NV in zip(self._shares, logits_S, strict=True):
            rows = share.rows
            self.rows_stepped += len(rows)
            share.length += 1 if rows else 0
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
        for share in self._shares:
            self._keep(share, [i for i, r in enumerate(share.rows) if id(r) in going])

    def _keep(self, share: _Share, kept: list[int]) -> None:
        """Keep only `share`'s rows at indices `kept` (and their cache rows)."""
        if len(kept) == len(share.rows):
            return
        if not kept:
            share.rows, share.pads, share.length = [], [], 0
            self._send(share, Keep([], 0))
            return
        share.rows = [share.rows[i] for i in kept]
        share.pads = [share.pads[i] for i in kept]
        trim = min(share.pads)  # columns every row pads: dropped
        share.pads = [p - trim for p in share.pads]
        share.length -= trim
        self._send(share, Keep(kept, trim))

    def _settle(self) -> None:
        """Once the batch is empty, the other ranks free their shares' caches now (Spread)."""
        if self._spread is None or self.rows or not any(s.ops for s in self._shares[1:]):
            return
        ops = [share.ops for share in self._shares[1:]]
        for share in self._shares[1:]:
            share.ops = []
        self._spread.settle(ops)

    def _send(self, share: _Share, op: Op) -> None:
        """`op` on `share`'s cache: now on rank 0's, with the next forward on another rank's."""
        if share.cache is None:
            share.ops.append(op)
        else:
            share.cache.apply(None, op)


def _allowed(job: SampleJob, logits_NV: Any) -> Any:
    """`logits_NV` with the job's banned tokens at -inf."""
    if not job.banned:
        return logits_NV
    out = logits_NV.clone()
    out[:, list(job.banned)] = float("-inf")
    return out


def _image_kwargs(model: Any, images: Expanded, device: Any) -> dict[str, Any]:
    """The forward's image arguments for one prompt with images."""
    vision = vision_of(model)
    assert vision is not None  # the sampler expanded the images with it
    return image_arguments([images], len(images.tokens), vision, device)


def first_position(images: Expanded, merge_size: int) -> int:
    """The position id of the first sampled token after a prompt with images: M-RoPE's next
    position, which runs behind the prompt's length."""
    return int(mrope_positions(images, merge_size).max()) + 1


def _prefill_batches(jobs: list[SampleJob]) -> list[list[list[SampleJob]]]:
    """Jobs grouped by prompt, and the groups into prefill forwards of at most PREFILL_TOKENS
    padded tokens; a job scoring its prompt is a forward of its own (it keeps every position's
    logits)."""
    groups: dict[Any, list[SampleJob]] = {}
    batches: list[list[list[SampleJob]]] = []
    for job in jobs:
        if _alone(job):
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


def filler_forward(model: Any) -> None:
    """A one-token forward of `model`, its output dropped: on a sharded base it runs the layers'
    all-gathers (this rank lending its shards) beside another rank's forward; they are the same
    for any input."""
    import torch

    model(input_ids=torch.zeros((1, 1), dtype=torch.long, device=_device(model)), use_cache=False)


def _scores_prompt(job: SampleJob) -> bool:
    """Whether `job` asks for its prompt's logprobs: its prefill keeps every position's logits."""
    return job.asks.any


def _alone(job: SampleJob) -> bool:
    """Whether `job` is prefilled alone: it scores its prompt or has images."""
    return _scores_prompt(job) or job.images is not None


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
