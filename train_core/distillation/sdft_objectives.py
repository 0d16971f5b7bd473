"""SDFT's three objectives (tinker-cookbook 0.6.1's distillation/sdft.py `topk` and `reverse`),
one table: which teacher output each needs, how its datums are built, and which loss trains on
them.

- forward (topk > 0, reverse off, the default): cross_entropy towards the teacher's renormalized
  top K, the forward KL over that set (train_core.distillation.topk).
- reverse (topk > 0, reverse on): the same [N, K] datums, trained with the analytical reverse KL
  over the teacher's top K, sum_k p(x_k) * sg[log p(x_k) - log q(x_k)] with the student's p
  renormalized over those K slots, a custom loss (gradient through p only, as importance_sampling).
- per_token (topk = 0): a single-sample estimate of the reverse KL: each completion token's
  advantage is the teacher's logprob of it minus the student's sampling logprob, trained with
  importance_sampling (the cookbook keeps it for old configs; reverse supersedes it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from tinker import types

from train_core.distillation.topk import (
    TeacherForcing,
    build_topk_distillation_datums,
    completion_positions,
    teacher_forcing,
)
from train_core.futures import resolve_future

if TYPE_CHECKING:
    from torch import Tensor


def per_token_advantage_datums(
    data_D: Sequence[types.Datum],
    forcings_D: Sequence[TeacherForcing],
    teacher_logprobs_D: Sequence[Sequence[float | None]],
) -> tuple[list[types.Datum], dict[str, float]]:
    """The RL datums with `advantages` = teacher logprob - student logprob at each completion
    position (0 elsewhere; a position the teacher gave None counts as teacher logprob 0).
    Datums with no completion keep their advantages. Metrics: the mean advantage, teacher and
    student logprob per weighted position, the truncated count, the datum count."""
    out_D: list[types.Datum] = []
    adv_sum = mask_sum = teacher_sum = student_sum = 0.0
    for datum, forcing, teacher_T in zip(data_D, forcings_D, teacher_logprobs_D, strict=True):
        if forcing.completion_len == 0:
            out_D.append(datum)
            continue
        mask_N = datum.loss_fn_inputs["mask"].to_numpy().astype(np.float32)
        student_N = datum.loss_fn_inputs["logprobs"].to_numpy().astype(np.float32)
        start = forcing.prompt_len
        window = teacher_T[start : start + forcing.completion_len]
        teacher_C = np.asarray([0.0 if v is None else v for v in window], dtype=np.float32)
        kept = [(p, o) for p, o in completion_positions(mask_N, forcing.completion_len) if o < len(teacher_C)]  # fmt: skip
        adv_N = np.zeros_like(mask_N)
        for pos, offset in kept:
            adv_N[pos] = teacher_C[offset] - student_N[pos]
        inputs = dict(datum.loss_fn_inputs)
        inputs["advantages"] = types.TensorData.from_numpy(adv_N)
        out_D.append(types.Datum(model_input=datum.model_input, loss_fn_inputs=inputs))
        adv_sum += float((adv_N * mask_N).sum())
        mask_sum += float(mask_N.sum())
        teacher_sum += float(sum(teacher_C[o] for _, o in kept))
        student_sum += float(sum(student_N[p] for p, _ in kept))
    metrics: dict[str, float] = {}
    if mask_sum > 0:
        metrics["mean_advantage"] = adv_sum / mask_sum
        metrics["mean_teacher_lp"] = teacher_sum / mask_sum
        metrics["mean_student_lp"] = student_sum / mask_sum
    metrics["teacher_truncated_count"] = float(sum(f.truncated for f in forcings_D))
    metrics["num_datums"] = float(len(data_D))
    return out_D, metrics


async def build_per_token_advantage_datums(
    data_D: Sequence[types.Datum],
    metadata_D: Sequence[dict[str, int]],
    teacher_client: Any,
    teacher_prompts_P: Sequence[types.ModelInput],
    max_context_length: int = 32768,
) -> tuple[list[types.Datum], dict[str, float]]:
    """topk = 0's datums: each completion scored by the teacher (compute_logprobs) after its
    group's teacher prompt. All requests are sent before any is awaited."""
    forcings_D = [
        teacher_forcing(d, teacher_prompts_P[m["group_idx"]], max_context_length)
        for d, m in zip(data_D, metadata_D, strict=True)
    ]
    futures = [teacher_client.compute_logprobs(f.model_input) for f in forcings_D]
    teacher_D = await asyncio.gather(*(resolve_future(f) for f in futures))
    return per_token_advantage_datums(data_D, forcings_D, teacher_D)


def reverse_kl_topk_loss(
    data: list[types.Datum], logprobs_D: list[Tensor]
) -> tuple[Tensor, dict[str, float]]:
    """The reverse KL to the teacher over its top K, a forward_backward_custom loss on the
    top-K datums (`weights` [N, K]: the teacher's renormalized probabilities, 0 at empty slots and
    unweighted positions; `logprobs_D[i]` [N, K]: the student's logprobs of those tokens).
    Per position: p = the student renormalized over the non-empty slots, loss
    sum_k p_k * sg[log p_k - log q_k]; summed over positions and datums."""
    import torch  # lazily: train_core imports torch only where a loss runs

    device = logprobs_D[0].device if logprobs_D else "cpu"
    total = torch.zeros((), device=device)
    kl_sum = entropy_sum = positions = 0.0
    for datum, student_NK in zip(data, logprobs_D, strict=True):
        q_NK = torch.as_tensor(datum.loss_fn_inputs["weights"].to_numpy(), device=student_NK.device)
        slots_NK = q_NK > 0
        at_N = slots_NK.any(dim=-1).to(student_NK.dtype)
        log_q_NK = torch.where(slots_NK, q_NK.clamp(min=1e-30).log(), torch.zeros_like(q_NK))
        masked_NK = torch.where(slots_NK, student_NK, torch.full_like(student_NK, float("-inf")))
        # a row with no slot is all -inf: its NaNs are zeroed, and the slot mask drops it
        log_p_NK = torch.nan_to_num(masked_NK.log_softmax(dim=-1), nan=0.0, neginf=0.0)
        p_NK = log_p_NK.exp()
        gap_NK = (log_p_NK - log_q_NK).detach()
        total = total + ((p_NK * gap_NK * slots_NK).sum(dim=-1) * at_N).sum()
        with torch.no_grad():
            kl_sum += float(((p_NK * gap_NK * slots_NK).sum(dim=-1) * at_N).sum())
            entropy_sum += float((-(p_NK * log_p_NK * slots_NK).sum(dim=-1) * at_N).sum())
            positions += float(at_N.sum())
    metrics = {"reverse_kl_loss": float(total.detach()), "reverse_kl_positions": positions}
    if positions:
        metrics["reverse_kl_mean"] = kl_sum / positions
        metrics["student_entropy_mean"] = entropy_sum / positions
    return total, metrics


# The teacher's datums for an objective: (data_D, metadata_D, teacher client, teacher prompts,
# topk, max_context_length, vocab_size, skip_first_n_tokens) -> (datums, metrics).
DatumBuilder = Callable[..., Any]


async def _per_token(
    data_D: Sequence[types.Datum],
    metadata_D: Sequence[dict[str, int]],
    client: Any,
    prompts_P: Sequence[types.ModelInput],
    topk: int,
    max_len: int,
    vocab: int | None,
    skip: int,
) -> tuple[list[types.Datum], dict[str, float]]:
    del topk, vocab, skip  # a sampled token's logprob: no top K, no vocabulary filter, no skip
    return await build_per_token_advantage_datums(data_D, metadata_D, client, prompts_P, max_len)


@dataclass(frozen=True)
class SDFTObjective:
    """One row of the table: the datum builder, and the loss, a built-in by name or a custom
    loss function (forward_backward_custom)."""

    build: DatumBuilder
    loss: str | Callable[[list[types.Datum], list[Any]], tuple[Any, dict[str, float]]]
    soft_targets: bool  # [N, K] datums (the teacher-student cross-entropy is defined on them)


SDFT_OBJECTIVES: dict[str, SDFTObjective] = {
    "forward": SDFTObjective(build_topk_distillation_datums, "cross_entropy", True),
    "reverse": SDFTObjective(build_topk_distillation_datums, reverse_kl_topk_loss, True),
    "per_token": SDFTObjective(_per_token, "importance_sampling", False),
}


def sdft_objective(topk: int, reverse: bool) -> str:
    """The objective the cookbook's (topk, reverse) select; reverse needs a top K to run over."""
    if topk == 0 and reverse:
        raise ValueError(
            "reverse=True needs topk > 0: the reverse KL runs over the teacher's top K"
        )
    if topk == 0:
        return "per_token"
    return "reverse" if reverse else "forward"
