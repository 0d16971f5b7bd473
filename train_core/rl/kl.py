"""KL estimates between the policy that sampled a batch and other policies, over action tokens.

All functions read the assembled RL datums (`logprobs`, `mask`, `advantages`, `target_tokens` in
loss_fn_inputs) and other policies' logprobs aligned with the targets (a forward's outputs, or
`train_core.scoring.score_full_sequences`); no client calls. Formulas and keys as tinker-cookbook 0.6.1:
with d = logp_sampler - logp_other on action tokens, v1 = mean(d), v2 = mean(d^2) / 2.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
from tinker import types

from train_core.arrays import as_array
from train_core.rl.advantages import discounted_future_sum


def _action_columns(datum: types.Datum) -> tuple[np.ndarray, np.ndarray]:
    """(sampling logprobs_T, boolean action mask_T) of one datum."""
    inputs = datum.loss_fn_inputs
    if "mask" not in inputs:
        raise ValueError(
            "KL metrics need the datum's `mask` column; pass the datums as assembled, "
            "before datum_for_loss"
        )
    return as_array(inputs["logprobs"]), as_array(inputs["mask"]) > 0


def _kl_estimates(diffs: list[np.ndarray], what: str) -> tuple[float, float]:
    flat = np.concatenate(diffs) if diffs else np.empty(0)
    if flat.size == 0:
        raise ValueError(f"{what}: the batch has no action tokens (mask is 0 everywhere)")
    return float(flat.mean()), float(0.5 * np.mean(flat**2))


def _aligned(logprobs: Any, sampling_T: np.ndarray, what: str, i: int) -> np.ndarray:
    """Another policy's logprobs of datum i's targets, checked against the sampler's."""
    other_T = as_array(logprobs)
    if other_T.shape != sampling_T.shape:
        raise ValueError(
            f"{what}: datum {i} has {sampling_T.size} targets but {other_T.size} logprobs; "
            "expected equal lengths"
        )
    return other_T


def compute_kl_sample_train(
    data_D: Sequence[types.Datum], training_logprobs_D: Sequence[Any]
) -> dict[str, float]:
    """Sampler-vs-trainer drift on this batch's action tokens, and the sampler's entropy estimate.

    `training_logprobs_D`: one array per datum, aligned with its targets (what forward or
    forward_backward returns as `loss_fn_outputs[i]["logprobs"]`).
    Keys: optim/kl_sample_train_v1, optim/kl_sample_train_v2, optim/entropy, and
    sampler/logprob_gap: the mean absolute difference between the sampler's and the trainer's
    logprob of a sampled token, which importance-sampling losses rely on being small (a vLLM
    sampler against the local trainer: bf16 noise; docs/sampling.md).
    """
    if len(data_D) != len(training_logprobs_D):
        raise ValueError(
            f"compute_kl_sample_train: {len(data_D)} datums but {len(training_logprobs_D)} "
            "training logprob arrays; expected one per datum"
        )
    diffs: list[np.ndarray] = []
    sampled: list[np.ndarray] = []
    for i, (datum, training) in enumerate(zip(data_D, training_logprobs_D, strict=True)):
        sampling_T, action_T = _action_columns(datum)
        training_T = _aligned(training, sampling_T, "compute_kl_sample_train", i)
        diffs.append(sampling_T[action_T] - training_T[action_T])
        sampled.append(sampling_T[action_T])
    v1, v2 = _kl_estimates(diffs, "compute_kl_sample_train")
    return {
        "optim/kl_sample_train_v1": v1,
        "optim/kl_sample_train_v2": v2,
        "optim/entropy": float(-np.concatenate(sampled).mean()),
        "sampler/logprob_gap": float(np.abs(np.concatenate(diffs)).mean()),
    }


def compute_post_kl(
    data_D: Sequence[types.Datum], new_logprobs_D: Sequence[Any]
) -> dict[str, float]:
    """How far the update moved the policy: sampler logprobs vs the updated policy's
    (`new_logprobs_D[i]` aligned with datum i's targets). Keys: kl_pre_post_v1/v2."""
    diffs: list[np.ndarray] = []
    for i, (datum, new_logprobs) in enumerate(zip(data_D, new_logprobs_D, strict=True)):
        sampling_T, action_T = _action_columns(datum)
        new_T = _aligned(new_logprobs, sampling_T, "compute_post_kl", i)
        diffs.append(sampling_T[action_T] - new_T[action_T])
    v1, v2 = _kl_estimates(diffs, "compute_post_kl")
    return {"kl_pre_post_v1": v1, "kl_pre_post_v2": v2}


def incorporate_kl_penalty(
    data_D: Sequence[types.Datum],
    base_logprobs_D: Sequence[Any],
    kl_penalty_coef: float,
    kl_discount_factor: float = 0.0,
) -> tuple[list[types.Datum], dict[str, float]]:
    """Datums whose advantages carry a penalty for drifting from a base (reference) policy.

    Per action token, d = logp_sampler - logp_base and the advantage gains
    coef * (mean(d) - d): tokens above the batch's average drift are pushed down. With a discount
    factor > 0 the penalty becomes its discounted future sum. `base_logprobs_D[i]` is aligned with
    datum i's targets. Returns new datums (inputs untouched) and {"kl_policy_base": mean(d)}.
    """
    diffs_D: list[np.ndarray] = []
    masks_D: list[np.ndarray] = []
    for i, (datum, base_logprobs) in enumerate(zip(data_D, base_logprobs_D, strict=True)):
        sampling_T, action_T = _action_columns(datum)
        base_T = _aligned(base_logprobs, sampling_T, "incorporate_kl_penalty", i)
        mask_T = action_T.astype(np.float64)
        diffs_D.append(np.where(action_T, sampling_T - base_T, 0.0))
        masks_D.append(mask_T)
    n_action = sum(float(m.sum()) for m in masks_D)
    if n_action == 0:
        raise ValueError("incorporate_kl_penalty: the batch has no action tokens")
    mean_diff = sum(float(d.sum()) for d in diffs_D) / n_action
    out: list[types.Datum] = []
    for datum, diff_T, mask_T in zip(data_D, diffs_D, masks_D, strict=True):
        penalty_T = kl_penalty_coef * mask_T * (mean_diff - diff_T)
        if kl_discount_factor > 0:
            penalty_T = discounted_future_sum(penalty_T, kl_discount_factor)
        advantages_T = as_array(datum.loss_fn_inputs["advantages"]) + penalty_T
        loss_fn_inputs = dict(datum.loss_fn_inputs)
        loss_fn_inputs["advantages"] = types.TensorData.from_numpy(advantages_T.astype(np.float32))
        out.append(dataclasses.replace(datum, loss_fn_inputs=loss_fn_inputs))
    return out, {"kl_policy_base": mean_diff}
