"""Sampling rules shared by every row of a decode batch (see decode_batch.py): stop rules, token
choice under temperature / top-k / top-p, and prompt scores.

Returned logprobs are the Tinker service's: log_softmax(logits / T) of the sampled token at the
request's temperature T (before top-k / top-p; T <= 0, greedy, reports T = 1), the distribution the
token was drawn from, so an importance ratio p_theta / q at T != 1 weighs samples correctly. The stop
token or the token completing a stop string is included in the sample, as the Tinker service does.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tinker import types

from kitchen.engine.errors import BackendError


@dataclass(frozen=True)
class StopRule:
    """When a sample ends: on one of `token_ids`, or once its text contains one of `strings`."""

    token_ids: frozenset[int]
    strings: tuple[str, ...]

    @classmethod
    def from_params(cls, params: types.SamplingParams, eos_ids: Collection[int]) -> StopRule:
        """Tinker's rule: stop=None keeps EOS; a list replaces it ([] disables stopping entirely)."""
        stop = params.stop
        if stop is None:
            return cls(frozenset(eos_ids), ())
        if isinstance(stop, str):
            return cls(frozenset(), (stop,))
        ints = [s for s in stop if isinstance(s, int) and not isinstance(s, bool)]
        strings = [s for s in stop if isinstance(s, str)]
        if len(ints) + len(strings) != len(stop):
            raise BackendError(f"sampling_params.stop = {stop!r}: expected strings or token ids")
        return cls(frozenset(ints), tuple(s for s in strings if s))

    def stops(self, tokens: list[int], tokenizer: Any) -> bool:
        if tokens[-1] in self.token_ids:
            return True
        if not self.strings:
            return False
        # A stop string of L characters spans at most 4 * L byte-level tokens (a char is <= 4 bytes).
        window = 4 * max(len(s) for s in self.strings) + 1
        tail = tokenizer.decode(tokens[-window:], skip_special_tokens=False)
        return any(s in tail for s in self.strings)


@dataclass
class Generated:
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    stop_reason: str = "length"
    # The top-k (token, logprob) at each sampled position (SampleRequest.topk_sample_logprobs).
    topk: list[list[tuple[int, float]] | None] | None = None


@dataclass
class PromptScores:
    logprobs: list[float | None] | None = None
    topk: list[list[tuple[int, float]] | None] | None = None
    targets: np.ndarray | None = None  # float32 [P - 1, K]: logprobs of the asked ids, 0 at -1
    alt_tokens: np.ndarray | None = (
        None  # int64 [P - 1, k]: draws at every position after the first
    )
    alt_logprobs: np.ndarray | None = None  # float32 [P - 1, k]: their logprobs


@dataclass(frozen=True)
class PromptAsks:
    """What a request asks of its prompt beyond sampling: each token's logprob, the top-k at
    every position, the logprobs of chosen ids (`targets_RK`, int64 [P - 1, K], -1 for none),
    and `alt_k` draws at every position from `alt_stream` (their own stream, so asking for them
    leaves the samples unchanged)."""

    logprobs: bool = False
    topk: int = 0
    targets_RK: np.ndarray | None = None
    alt_k: int = 0
    alt_stream: Any = None  # SeedStream

    @property
    def any(self) -> bool:
        return self.logprobs or self.topk > 0 or self.targets_RK is not None or self.alt_k > 0


def check_sampling_params(params: types.SamplingParams) -> None:
    """Refuse parameters no distribution satisfies, with the reason (BackendError)."""
    problems = []
    if not params.temperature >= 0:  # also catches NaN
        problems.append(f"temperature is {params.temperature}; expected >= 0")
    if not 0 < params.top_p <= 1:
        problems.append(f"top_p is {params.top_p}; expected 0 < top_p <= 1")
    if params.top_k < -1 or params.top_k == 0:
        problems.append(f"top_k is {params.top_k}; expected -1 (no limit) or >= 1")
    if params.max_tokens is not None and params.max_tokens < 0:
        problems.append(f"max_tokens is {params.max_tokens}; expected >= 0")
    if problems:
        raise BackendError("sampling_params: " + "; ".join(problems))


def choose_tokens(logits_NV: Any, params: types.SamplingParams, u_N1: Any) -> Any:
    """Next token per row under temperature, top-k and top-p (temperature <= 0: greedy, and `u_N1`
    is not read: None). `u_N1`: each row's uniform number (its request's SeedStream)."""
    import torch

    if params.temperature <= 0:
        return logits_NV.argmax(dim=-1)
    scores = logits_NV / params.temperature if params.temperature != 1 else logits_NV
    vocab = scores.shape[-1]
    if 0 < params.top_k < vocab:
        kth = torch.topk(scores, params.top_k, dim=-1).values[:, -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if params.top_p < 1:
        sorted_scores, order = scores.sort(dim=-1, descending=True)
        probs = sorted_scores.softmax(dim=-1)
        # Drop a token once the mass before it already reaches top_p; the top token always stays.
        drop = (probs.cumsum(dim=-1) - probs) >= params.top_p
        sorted_scores = sorted_scores.masked_fill(drop, float("-inf"))
        scores = torch.full_like(scores, float("-inf")).scatter(-1, order, sorted_scores)
    return draw_tokens(scores.softmax(dim=-1), u_N1)


def draw_tokens(probs_NV: Any, u_N1: Any) -> Any:
    """One token per row of `probs_NV`, drawn exactly by inverting its CDF at the row's uniform
    number (float64 [N, 1], from its request's SeedStream). torch.multinomial costs 1.1 ms a row over SmolLM2's 49k vocabulary on
    this CPU (36 ms of a 32-row decode step); this costs about 0.05 ms. A token of probability 0 is
    never drawn: the first cumulative sum above u * total is one that a nonzero probability raised.
    u * total can round up to the total (p ~ 2^-53); capped just below it, it takes the last token
    that has probability, without reading the device to check."""
    import torch

    cdf_NV = probs_NV.double().cumsum(dim=-1)
    total_N1 = cdf_NV[:, -1:]
    below_N1 = torch.nextafter(total_N1, torch.zeros_like(total_N1))
    return torch.searchsorted(cdf_NV, torch.minimum(u_N1 * total_N1, below_N1), right=True)[:, 0]


def sampled_logprobs(logits_NV: Any, tokens_N: Any, temperature: float) -> Any:
    """log_softmax(logits / T) of each row's sampled token (T <= 0 or T = 1: the plain logits)."""
    import torch

    scores = logits_NV / temperature if temperature > 0 and temperature != 1 else logits_NV
    return torch.log_softmax(scores, dim=-1).gather(-1, tokens_N[:, None]).squeeze(-1)


def prompt_scores(
    logits_PV: Any, prompt_P: Any, asks: PromptAsks, temperature: float = 1.0
) -> PromptScores:
    """What `asks` names of the prompt: every token's logprob given its prefix (None for the
    first), the top-k there, the logprobs of the asked ids (all at temperature 1, the model's own
    distribution), and draws at the request's `temperature` (<= 0: the argmax) with their
    logprobs at that temperature, as a sampled token's."""
    import torch

    out = PromptScores()
    lsm = torch.log_softmax(logits_PV[:-1].float(), dim=-1)
    if asks.logprobs:
        out.logprobs = [None, *lsm.gather(-1, prompt_P[1:, None]).squeeze(-1).tolist()]
    if asks.topk > 0:
        values, ids = lsm.topk(min(asks.topk, lsm.shape[-1]), dim=-1)
        rows = [
            list(zip(i, v, strict=True)) for i, v in zip(ids.tolist(), values.tolist(), strict=True)
        ]
        out.topk = [None, *rows]
    if asks.targets_RK is not None:
        ids_RK = torch.as_tensor(asks.targets_RK, device=lsm.device)
        asked_RK = ids_RK >= 0
        picked_RK = lsm.gather(-1, torch.where(asked_RK, ids_RK, 0))
        out.targets = torch.where(asked_RK, picked_RK, 0.0).cpu().numpy().astype(np.float32)
    if asks.alt_k > 0:
        out.alt_tokens, out.alt_logprobs = _alt_draws(logits_PV[:-1].float(), asks, temperature)
    return out


def _alt_draws(logits_RV: Any, asks: PromptAsks, temperature: float) -> tuple[Any, Any]:
    """`asks.alt_k` independent draws per row, with replacement, at `temperature`."""
    import torch

    rows, k = logits_RV.shape[0], asks.alt_k
    if temperature <= 0:
        tokens_RK = logits_RV.argmax(dim=-1, keepdim=True).expand(rows, k)
        lsm = torch.log_softmax(logits_RV, dim=-1)
    else:
        lsm = torch.log_softmax(logits_RV / temperature, dim=-1)
        probs_NV = lsm.exp().repeat_interleave(k, dim=0)
        u_N1 = asks.alt_stream.uniform((rows * k, 1), logits_RV.device)
        tokens_RK = draw_tokens(probs_NV, u_N1).reshape(rows, k)
    logprobs_RK = lsm.gather(-1, tokens_RK)
    return (
        tokens_RK.cpu().numpy().astype(np.int64),
        logprobs_RK.cpu().numpy().astype(np.float32),
    )


def sampled_topk(logits_NV: Any, temperature: float, k: int) -> list[list[tuple[int, float]]]:
    """The top-`k` (token, logprob) of each row at `temperature`, as sampled_logprobs reports a
    sampled token's (so a sampled token among them carries its own logprob)."""
    import torch

    scores = logits_NV / temperature if temperature > 0 and temperature != 1 else logits_NV
    values, ids = torch.log_softmax(scores.float(), dim=-1).topk(min(k, scores.shape[-1]), dim=-1)
    return [
        list(zip(i, v, strict=True)) for i, v in zip(ids.tolist(), values.tolist(), strict=True)
    ]
