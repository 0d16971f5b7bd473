"""Top-K soft targets: a teacher's K most likely next tokens at each position, renormalized over
those K, as cross_entropy datums with [N, K] `target_tokens` and `weights` (tinker-cookbook
0.6.1's distillation/sdft.py `build_topk_distillation_datums` and train_off_policy.py).

The loss those datums give, -sum_k p_teacher(x_k | t) log p_student(x_k | t) summed over
positions, is the forward KL to the teacher restricted to its top K, up to the teacher's entropy.

Two shapes of input:
- on a student's sampled completion (SDFT): the completion (the tokens after the datum's first
  weighted position) is appended to the teacher's own prompt, which may differ from the student's
  (a demonstration in it); positions line up by their offset from the completion's start;
- on fixed data (off-policy): the teacher reads the datum's whole sequence, positions line up one
  to one, and only positions the datum weights keep their targets.

Everything here is pure: the teacher's sample(..., topk_prompt_logprobs=K) responses come in, the
datums go out. `build_topk_distillation_datums` is the one function that calls a client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tinker import types

from train_core.futures import resolve_future
from train_core.scoring import full_sequence

# One position's top-K: (token id, teacher logprob) pairs, most likely first; None where the
# teacher gave none (position 0 of every prompt).
TopKEntries = Sequence[tuple[int, float]] | None


@dataclass(frozen=True)
class TeacherForcing:
    """A student completion appended to the teacher's prompt: what the teacher reads."""

    model_input: types.ModelInput
    prompt_len: int
    completion_len: int
    truncated: bool


def completion_positions(mask_N: np.ndarray, completion_len: int) -> list[tuple[int, int]]:
    """(student position, offset in the completion) of each weighted position whose offset from
    the first weighted one is inside the completion."""
    indices = np.flatnonzero(np.asarray(mask_N) > 0)
    if len(indices) == 0:
        return []
    first = int(indices[0])
    return [(int(i), int(i) - first) for i in indices if int(i) - first < completion_len]


def teacher_forcing(
    datum: types.Datum, teacher_prompt: types.ModelInput, max_context_length: int
) -> TeacherForcing:
    """The datum's completion (every token after its first weighted position) on `teacher_prompt`,
    cut to fit `max_context_length` (the teacher's prompt alone when nothing fits or there is no
    completion)."""
    mask_N = datum.loss_fn_inputs["mask"].to_numpy()
    weighted = np.flatnonzero(mask_N > 0)
    prompt_len = teacher_prompt.length
    alone = TeacherForcing(teacher_prompt, prompt_len, 0, False)
    if len(weighted) == 0:
        return alone
    completion = full_sequence(datum).to_ints()[int(weighted[0]) + 1 :]
    room = max_context_length - prompt_len
    if room <= 0:
        return TeacherForcing(teacher_prompt, prompt_len, 0, True)
    truncated = len(completion) > room
    completion = completion[:room]
    if not completion:
        return alone
    forced = types.ModelInput.from_ints([*teacher_prompt.to_ints(), *completion])
    return TeacherForcing(forced, prompt_len, len(completion), truncated)


def renormalized_topk(
    entries: Sequence[tuple[int, float]], k: int, vocab_size: int | None
) -> tuple[np.ndarray, np.ndarray] | None:
    """(token ids, logprobs) of the first k entries whose id is below `vocab_size`, the logprobs
    renormalized over them; None when none is left (a teacher may return ids of added tokens the
    student's embedding lacks)."""
    kept = [(t, lp) for t, lp in entries[:k] if vocab_size is None or t < vocab_size]
    if not kept:
        return None
    ids_K = np.asarray([t for t, _ in kept], dtype=np.int64)
    lp_K = np.asarray([lp for _, lp in kept], dtype=np.float32)
    return ids_K, lp_K - np.float32(np.logaddexp.reduce(lp_K.astype(np.float64)))


def _soft_datum(datum: types.Datum, ids_NK: np.ndarray, weights_NK: np.ndarray) -> types.Datum:
    return types.Datum(
        model_input=datum.model_input,
        loss_fn_inputs={
            "target_tokens": types.TensorData.from_numpy(ids_NK),
            "weights": types.TensorData.from_numpy(weights_NK),
        },
    )


def completion_topk_datums(
    data_D: Sequence[types.Datum],
    forcings_D: Sequence[TeacherForcing],
    topk_D: Sequence[Sequence[TopKEntries] | None],
    topk: int,
    vocab_size: int | None = None,
    skip_first_n_tokens: int = 3,
) -> tuple[list[types.Datum], dict[str, float]]:
    """Datums whose targets at each completion position are the teacher's renormalized top K read
    at the same offset of the teacher's completion (`topk_D[i]`: datum i's
    `topk_prompt_logprobs`). The first `skip_first_n_tokens` completion positions, and positions
    the teacher gave nothing at, keep weight 0. Metrics: the completion tokens and the teacher's
    mean entropy over its top K."""
    out_D: list[types.Datum] = []
    n_completion, entropy_sum = 0, 0.0
    for datum, forcing, topk_T in zip(data_D, forcings_D, topk_D, strict=True):
        n = datum.model_input.length
        ids_NK = np.zeros((n, topk), dtype=np.int64)
        weights_NK = np.zeros((n, topk), dtype=np.float32)
        mask_N = datum.loss_fn_inputs["mask"].to_numpy()
        positions = completion_positions(mask_N, forcing.completion_len)
        for t, (pos, offset) in enumerate(positions):
            teacher_pos = forcing.prompt_len + offset
            if t < skip_first_n_tokens or topk_T is None or teacher_pos >= len(topk_T):
                continue
            entries = topk_T[teacher_pos]
            soft = renormalized_topk(entries, topk, vocab_size) if entries is not None else None
            if soft is None:
                continue
            ids_K, lp_K = soft
            p_K = np.exp(lp_K)
            ids_NK[pos, : len(ids_K)] = ids_K
            weights_NK[pos, : len(p_K)] = p_K
            entropy_sum += float(-(p_K * lp_K).sum())
        n_completion += len(positions)
        out_D.append(_soft_datum(datum, ids_NK, weights_NK))
    metrics = {
        "teacher_truncated_count": float(sum(f.truncated for f in forcings_D)),
        "num_datums": float(len(data_D)),
        "topk": float(topk),
    }
    if n_completion:
        metrics["total_completion_tokens"] = float(n_completion)
        metrics["mean_teacher_entropy"] = entropy_sum / n_completion
    return out_D, metrics


def sequence_topk_datum(
    datum: types.Datum, topk_T: Sequence[TopKEntries] | None, topk: int
) -> types.Datum:
    """A fixed-data datum (its [N] `target_tokens` and `weights`) with the teacher's renormalized
    top K at every position, read from the teacher's scoring of the datum's whole sequence;
    positions of weight 0 keep weight 0. Short top-K lists are padded with their first id at
    probability 0. With no top K from the teacher, the datum is returned as it is (hard targets)."""
    weights_N = datum.loss_fn_inputs["weights"].to_numpy()
    if topk_T is None:
        return datum
    n = len(weights_N)
    rows = topk_T[len(topk_T) - n :]  # the last n positions predict the n targets
    ids_NK = np.zeros((n, topk), dtype=np.int64)
    lp_NK = np.full((n, topk), -np.inf, dtype=np.float32)
    for i, entries in enumerate(rows):
        if entries is None:
            raise ValueError(f"teacher gave no top-K logprobs at position {i} of a datum's targets")
        kept = list(entries[:topk])
        ids_NK[i, :] = kept[0][0]
        ids_NK[i, : len(kept)] = [t for t, _ in kept]
        lp_NK[i, : len(kept)] = [lp for _, lp in kept]
    norm_N1 = np.logaddexp.reduce(lp_NK.astype(np.float64), axis=-1, keepdims=True)
    weights_NK = np.exp(lp_NK - norm_N1.astype(np.float32)) * (weights_N > 0)[:, None]
    return _soft_datum(datum, ids_NK, weights_NK.astype(np.float32))


def topk_request(client: Any, model_input: types.ModelInput, topk: int) -> Any:
    """The teacher's top-K logprobs at every position of `model_input` (one sampled token, unused)."""
    return client.sample(
        model_input,
        1,
        types.SamplingParams(max_tokens=1),
        include_prompt_logprobs=True,
        topk_prompt_logprobs=topk,
    )


async def build_topk_distillation_datums(
    data_D: Sequence[types.Datum],
    metadata_D: Sequence[dict[str, int]],
    teacher_client: Any,
    teacher_prompts_P: Sequence[types.ModelInput],
    topk: int = 20,
    max_context_length: int = 32768,
    vocab_size: int | None = None,
    skip_first_n_tokens: int = 3,
) -> tuple[list[types.Datum], dict[str, float]]:
    """SDFT's datums: each student datum's completion read by the teacher after the prompt of its
    group (`metadata_D[i]["group_idx"]` into `teacher_prompts_P`), top-K targets from what the
    teacher returns. All requests are sent before any is awaited."""
    forcings_D = [
        teacher_forcing(d, teacher_prompts_P[m["group_idx"]], max_context_length)
        for d, m in zip(data_D, metadata_D, strict=True)
    ]
    futures = [topk_request(teacher_client, f.model_input, topk) for f in forcings_D]
    responses = await asyncio.gather(*(resolve_future(f) for f in futures))
    topk_D = [r.topk_prompt_logprobs for r in responses]
    return completion_topk_datums(data_D, forcings_D, topk_D, topk, vocab_size, skip_first_n_tokens)


async def sequence_topk_datums(
    data_D: Sequence[types.Datum], teachers_D: Sequence[Any], topk: int
) -> list[types.Datum]:
    """Off-policy distillation's datums: datum i scored by its own teacher client `teachers_D[i]`.
    All requests are sent before any is awaited."""
    futures = [
        topk_request(client, full_sequence(d), topk)
        for d, client in zip(data_D, teachers_D, strict=True)
    ]
    responses = await asyncio.gather(*(resolve_future(f) for f in futures))
    return [
        sequence_topk_datum(d, r.topk_prompt_logprobs, topk)
        for d, r in zip(data_D, responses, strict=True)
    ]
