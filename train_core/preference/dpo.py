"""The DPO loss (Rafailov et al. 2023) and the metrics tinker-cookbook 0.6.1 reports.

loss_b = -log sigmoid(beta * (chosen_logratio_b - rejected_logratio_b)), computed as
softplus(-x) = logaddexp(0, -x) so it stays finite for any margin. A logratio is the policy's
weighted sequence logprob minus the reference's. `margin` is mean(chosen_reward - rejected_reward)
with rewards already scaled by beta: beta enters once (tinker-cookbook issue 21, fixed by PR 172).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tinker import types

from train_core.arrays import FloatArray, as_array
from train_core.preference.pairs import chosen_rejected
from train_core.supervised.datum import datum_weights


@dataclass(frozen=True)
class DPOOutput:
    """Batch-mean DPO loss and its metrics."""

    loss: float
    accuracy: float  # fraction of pairs whose chosen logratio beats the rejected one
    margin: float  # mean(chosen_reward - rejected_reward)
    chosen_reward: float  # mean(beta * chosen_logratio)
    rejected_reward: float  # mean(beta * rejected_logratio)
    num_pairs: int

    def metrics(self) -> dict[str, float]:
        """0.6.1's metric keys: dpo_loss, accuracy, margin, chosen_reward, rejected_reward, num_pairs."""
        return {
            "dpo_loss": self.loss,
            "accuracy": self.accuracy,
            "margin": self.margin,
            "chosen_reward": self.chosen_reward,
            "rejected_reward": self.rejected_reward,
            "num_pairs": float(self.num_pairs),
        }


def _check_pairs(chosen_B: FloatArray, rejected_B: FloatArray, beta: float) -> None:
    if chosen_B.shape != rejected_B.shape:
        raise ValueError(
            f"dpo: {chosen_B.size} chosen logratios but {rejected_B.size} rejected; expected pairs"
        )
    if chosen_B.size == 0:
        raise ValueError("dpo: no pairs in the batch")
    if not beta > 0:
        raise ValueError(f"dpo: beta is {beta}; expected > 0")


def pair_logratios(policy_D: Any, reference_D: Any) -> tuple[Any, Any]:
    """(chosen_logratio_B, rejected_logratio_B) of an interleaved batch from its per-datum
    sequence logprobs: policy minus reference, split pair by pair. numpy or torch alike (the loss
    keeps its graph); the loss, the held-out metrics and the pairs transcript all read it here."""
    if len(policy_D) != len(reference_D):
        raise ValueError(
            f"dpo: {len(policy_D)} policy but {len(reference_D)} reference sequence logprobs"
        )
    return chosen_rejected(policy_D - reference_D)


def dpo_losses(chosen_logratio_B: Any, rejected_logratio_B: Any, beta: float) -> Any:
    """Per-pair -log sigmoid(beta * (chosen - rejected)) = logaddexp(0, -margin), stable for any
    margin. Torch tensors in, a differentiable tensor out (the loss make_dpo_loss_fn trains on);
    anything else in, float64 numpy out."""
    if hasattr(chosen_logratio_B, "detach"):  # torch, without importing it here
        import torch

        margin_B = beta * (chosen_logratio_B - rejected_logratio_B)
        return torch.logaddexp(torch.zeros_like(margin_B), -margin_B)
    chosen_B, rejected_B = as_array(chosen_logratio_B), as_array(rejected_logratio_B)
    _check_pairs(chosen_B, rejected_B, beta)
    return np.logaddexp(0.0, -beta * (chosen_B - rejected_B))


def dpo_output(
    losses_B: Any, chosen_logratio_B: Any, rejected_logratio_B: Any, beta: float
) -> DPOOutput:
    """The batch's DPOOutput from its per-pair losses and the logratios they came from (numpy or
    torch: the metrics are read from the values the loss was computed on)."""
    losses_B = as_array(losses_B)
    chosen_B, rejected_B = as_array(chosen_logratio_B), as_array(rejected_logratio_B)
    chosen_reward_B, rejected_reward_B = beta * chosen_B, beta * rejected_B
    return DPOOutput(
        loss=float(losses_B.mean()),
        accuracy=float(np.mean(chosen_B > rejected_B)),
        margin=float(np.mean(chosen_reward_B - rejected_reward_B)),
        chosen_reward=float(chosen_reward_B.mean()),
        rejected_reward=float(rejected_reward_B.mean()),
        num_pairs=int(chosen_B.size),
    )


def dpo_loss(chosen_logratio_B: Any, rejected_logratio_B: Any, beta: float) -> DPOOutput:
    """Mean DPO loss over B pairs plus 0.6.1's metrics."""
    losses_B = dpo_losses(chosen_logratio_B, rejected_logratio_B, beta)
    return dpo_output(losses_B, chosen_logratio_B, rejected_logratio_B, beta)


def weighted_logprob_sums(logprobs_list: Sequence[Any], data: Sequence[types.Datum]) -> FloatArray:
    """Per datum: sum over targets of logprob * weight (the sequence logprob DPO compares)."""
    if len(logprobs_list) != len(data):
        raise ValueError(f"dpo: {len(logprobs_list)} logprob rows for {len(data)} datums")
    sums = []
    for i, (logprobs, datum) in enumerate(zip(logprobs_list, data, strict=True)):
        logprobs_T, weights_T = as_array(logprobs), datum_weights(datum).astype(np.float64)
        if logprobs_T.shape != weights_T.shape:
            raise ValueError(
                f"dpo: datum {i} has {logprobs_T.size} logprobs but {weights_T.size} weights"
            )
        sums.append(float(logprobs_T @ weights_T))
    return np.array(sums, dtype=np.float64)


def _reference_sum(ref: Any, datum: types.Datum) -> float:
    """A reference entry is either a precomputed weighted sum or per-target logprobs to weight."""
    if not isinstance(ref, types.TensorData) and np.ndim(ref) == 0:
        return float(ref)
    return float(weighted_logprob_sums([ref], [datum])[0])


CustomLossFn = Callable[[list[types.Datum], list[Any]], tuple[Any, dict[str, float]]]


def make_dpo_loss_fn(reference_D: Sequence[Any], beta: float) -> CustomLossFn:
    """A forward_backward_custom loss for an interleaved batch [chosen_0, rejected_0, ...].

    `reference_D` holds, datum by datum in the batch's order, the reference model's weighted
    sequence logprob (a float) or its per-target logprobs (weighted here by the datum's weights,
    as 0.6.1's train_dpo does). The closure receives the policy's per-target logprob tensors,
    returns the mean DPO loss as a torch scalar (autograd flows into the policy logprobs) and
    `dpo_output`'s metrics of the same per-pair losses and logratios. torch is imported inside the
    closure only: it runs inside the backend, which already has torch.
    """
    if not beta > 0:
        raise ValueError(f"dpo: beta is {beta}; expected > 0")

    def dpo_loss_fn(
        data: list[types.Datum], logprobs_list: list[Any]
    ) -> tuple[Any, dict[str, float]]:
        import torch  # lazily: train_core stays importable without torch

        if len(reference_D) != len(data) or len(logprobs_list) != len(data):
            raise ValueError(
                f"dpo loss: {len(data)} datums, {len(logprobs_list)} logprob rows and "
                f"{len(reference_D)} reference entries; expected one of each per datum of "
                "interleaved (chosen, rejected) pairs"
            )
        sums = []
        for i, (datum, logprobs_T) in enumerate(zip(data, logprobs_list, strict=True)):
            weights_T = torch.as_tensor(datum_weights(datum), device=logprobs_T.device)
            if weights_T.shape != logprobs_T.shape:
                raise ValueError(
                    f"dpo loss: datum {i} has {logprobs_T.numel()} logprobs but "
                    f"{weights_T.numel()} weights"
                )
            sums.append(torch.dot(logprobs_T.float(), weights_T.float()))
        policy_D = torch.stack(sums)
        ref_D = torch.tensor(
            [_reference_sum(r, d) for r, d in zip(reference_D, data, strict=True)],
            dtype=policy_D.dtype,
            device=policy_D.device,
        )
        chosen_B, rejected_B = pair_logratios(policy_D, ref_D)
        losses_B = dpo_losses(chosen_B, rejected_B, beta)
        metrics = dpo_output(losses_B.detach(), chosen_B.detach(), rejected_B.detach(), beta)
        return losses_B.mean(), metrics.metrics()

    return dpo_loss_fn
