"""Per-token reverse-KL advantages against a teacher, and teacher_kl metrics.

As tinker-cookbook 0.6.1's on-policy distillation (`incorporate_kl_penalty`): the per-token reverse
KL estimate is log p_student(x_t) - log p_teacher(x_t) on the sampled tokens, masked to action
tokens; the advantage is -coef * KL, optionally replaced by its discounted future sum, and added to
whatever advantages the datum already carries. teacher_kl = sum(masked KL) / sum(mask).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from tinker import types

from train_core.arrays import FloatArray, as_array
from train_core.rl.advantages import discounted_future_sum


def _aligned(student_T: Any, teacher_T: Any, mask_T: Any) -> tuple[FloatArray, ...]:
    s, t, m = as_array(student_T), as_array(teacher_T), as_array(mask_T)
    if not s.shape == t.shape == m.shape:
        raise ValueError(
            f"distillation: student {s.size}, teacher {t.size} and mask {m.size} logprobs "
            "must align token for token"
        )
    return s, t, m


def reverse_kl_per_token(
    student_logprobs_T: Any, teacher_logprobs_T: Any, mask_T: Any
) -> FloatArray:
    """(log p_student - log p_teacher) on action tokens, 0 elsewhere."""
    student, teacher, mask = _aligned(student_logprobs_T, teacher_logprobs_T, mask_T)
    return (student - teacher) * mask


def reverse_kl_advantages(
    student_logprobs_T: Any,
    teacher_logprobs_T: Any,
    mask_T: Any,
    coef: float = 1.0,
    discount: float = 0.0,
) -> FloatArray:
    """advantages_T = -coef * mask * (student - teacher); with discount > 0, the discounted future
    sum of that, masked again to action tokens.

    The re-mask differs from 0.6.1, whose discounted sum also leaves non-zero advantages on the
    prompt and observation positions before an action (tokens the policy never sampled); with
    discount 0 (0.6.1's default) the two agree exactly.
    """
    student, teacher, mask = _aligned(student_logprobs_T, teacher_logprobs_T, mask_T)
    advantages_T = -coef * mask * ((student - teacher) * mask)
    if discount > 0:
        advantages_T = discounted_future_sum(advantages_T, discount) * mask
    return advantages_T


def teacher_kl_metrics(
    student_logprobs_D: Sequence[Any],
    teacher_logprobs_D: Sequence[Any],
    mask_D: Sequence[Any],
    dataset_tags_D: Sequence[Hashable] | None = None,
) -> dict[str, float]:
    """{"teacher_kl": ..., "teacher_kl/dataset_{tag}": ...}: token-weighted mean reverse KL.

    Tags are the dataset index (0.6.1's keys teacher_kl/dataset_0, ...) or a dataset name.
    """
    if not len(student_logprobs_D) == len(teacher_logprobs_D) == len(mask_D):
        raise ValueError("distillation: student, teacher and mask lists differ in length")
    tags = list(dataset_tags_D) if dataset_tags_D is not None else [None] * len(mask_D)
    if len(tags) != len(mask_D):
        raise ValueError(f"distillation: {len(tags)} dataset tags for {len(mask_D)} sequences")
    kl_sum, mask_sum = 0.0, 0.0
    per_tag: dict[Hashable, tuple[float, float]] = {}
    for student, teacher, mask, tag in zip(
        student_logprobs_D, teacher_logprobs_D, mask_D, tags, strict=True
    ):
        kl = float(reverse_kl_per_token(student, teacher, mask).sum())
        weight = float(as_array(mask).sum())
        kl_sum, mask_sum = kl_sum + kl, mask_sum + weight
        if tag is not None:
            prev_kl, prev_weight = per_tag.get(tag, (0.0, 0.0))
            per_tag[tag] = (prev_kl + kl, prev_weight + weight)
    metrics = {"teacher_kl": kl_sum / mask_sum if mask_sum > 0 else float("nan")}
    for tag, (kl, weight) in per_tag.items():
        if weight > 0:
            metrics[f"teacher_kl/dataset_{tag}"] = kl / weight
    return metrics


def apply_teacher_kl(
    data_D: Sequence[types.Datum],
    teacher_logprobs_D: Sequence[Any],
    dataset_tags_D: Sequence[Hashable] | None = None,
    coef: float = 1.0,
    discount: float = 0.0,
) -> tuple[list[types.Datum], dict[str, float]]:
    """RL datums (loss_fn_inputs logprobs, mask, advantages) -> copies with the KL advantages added.

    `teacher_logprobs_D[i]` aligns with datum i's targets (`target_logprobs` of the
    teacher's compute_logprobs on the full sequence, or `place_on_mask` when the teacher scored its
    own rendering of the prompt). A datum without "advantages" starts from zeros.
    """
    if len(teacher_logprobs_D) != len(data_D):
        raise ValueError(
            f"distillation: {len(teacher_logprobs_D)} teacher rows for {len(data_D)} datums"
        )
    student_D, mask_D, out_D = [], [], []
    for i, (datum, teacher_T) in enumerate(zip(data_D, teacher_logprobs_D, strict=True)):
        inputs = datum.loss_fn_inputs
        if "logprobs" not in inputs or "mask" not in inputs:
            raise ValueError(f"distillation: datum {i} lacks loss_fn_inputs 'logprobs' or 'mask'")
        student_T, mask_T = as_array(inputs["logprobs"]), as_array(inputs["mask"])
        base_T = as_array(inputs["advantages"]) if "advantages" in inputs else np.zeros_like(mask_T)
        advantages_T = base_T + reverse_kl_advantages(student_T, teacher_T, mask_T, coef, discount)
        new_inputs = dict(inputs)
        new_inputs["advantages"] = types.TensorData.from_numpy(advantages_T.astype(np.float32))
        out_D.append(dataclasses.replace(datum, loss_fn_inputs=new_inputs))
        student_D.append(student_T)
        mask_D.append(mask_T)
    return out_D, teacher_kl_metrics(student_D, teacher_logprobs_D, mask_D, dataset_tags_D)


def place_on_mask(values_K: Any, mask_T: Any, fill: float = 0.0) -> FloatArray:
    """Spread K per-action-token values over the T positions where mask > 0, in order.

    For a teacher that scored the completion under its own prompt format: its logprobs for the
    completion tokens land on the student's action positions.
    """
    values, mask = as_array(values_K), as_array(mask_T) > 0
    if values.size != int(mask.sum()):
        raise ValueError(
            f"distillation: {values.size} values for {int(mask.sum())} action positions"
        )
    out_T = np.full(mask.shape, fill, dtype=np.float64)
    out_T[mask] = values
    return out_T
