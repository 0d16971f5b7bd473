"""Held-out preference metrics: pairwise accuracy of the implicit reward, DPO loss, NLL on chosen.

The reference is frozen, so its per-target logprobs for an eval set can be computed once and
passed in; the policy's come from a training client's forward (pre-step weights).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from tinker import types

from train_core.evaluation.evaluator import EvaluatorClient
from train_core.preference.dpo import dpo_loss, pair_logratios, weighted_logprob_sums
from train_core.preference.pairs import chosen_rejected
from train_core.scoring import ForwardClient, forward_target_logprobs
from train_core.supervised.nll import compute_mean_nll


def preference_metrics(
    policy_logprobs_D: Sequence[Any],
    reference_logprobs_D: Sequence[Any],
    data: Sequence[types.Datum],
    beta: float,
    name: str = "test",
) -> dict[str, float]:
    """Metrics for interleaved [chosen_0, rejected_0, ...] data; logprobs align with weights.

    Keys: {name}/pairwise_accuracy, {name}/dpo_loss, {name}/margin, {name}/chosen_reward,
    {name}/rejected_reward, {name}/chosen_nll (weighted mean NLL of the chosen responses under the
    policy), {name}/num_pairs.
    """
    chosen_B, rejected_B = pair_logratios(
        weighted_logprob_sums(policy_logprobs_D, data),
        weighted_logprob_sums(reference_logprobs_D, data),
    )
    out = dpo_loss(chosen_B, rejected_B, beta)
    chosen_logprobs, _ = chosen_rejected(list(policy_logprobs_D))
    chosen_weights, _ = chosen_rejected([d.loss_fn_inputs["weights"] for d in data])
    chosen_nll = compute_mean_nll(chosen_logprobs, chosen_weights)
    return {
        f"{name}/pairwise_accuracy": out.accuracy,
        f"{name}/dpo_loss": out.loss,
        f"{name}/margin": out.margin,
        f"{name}/chosen_reward": out.chosen_reward,
        f"{name}/rejected_reward": out.rejected_reward,
        f"{name}/chosen_nll": chosen_nll,
        f"{name}/num_pairs": float(out.num_pairs),
    }


async def evaluate_preference_async(
    training_client: ForwardClient,
    data: Sequence[types.Datum],
    reference_logprobs_D: Sequence[Any],
    beta: float,
    name: str = "test",
) -> dict[str, float]:
    """One cross_entropy forward of the policy over the pairs: `preference_metrics` plus
    `{name}/nll`, the NLL of all responses (0.6.1's evaluator key)."""
    logprobs_D = await forward_target_logprobs(training_client, data)
    metrics = preference_metrics(logprobs_D, reference_logprobs_D, data, beta, name)
    metrics[f"{name}/nll"] = compute_mean_nll(
        logprobs_D, [d.loss_fn_inputs["weights"] for d in data]
    )
    return metrics


@dataclass(frozen=True, kw_only=True)
class PreferenceEvaluator:
    """An Evaluator: held-out pairwise accuracy, DPO loss, margin, rewards and NLLs of the
    interleaved pairs under the training client's current weights, against the frozen
    reference's logprobs of the same pairs (computed once)."""

    beta: float
    prefix: str = "test"
    name: ClassVar[str] = "preference"
    client: ClassVar[EvaluatorClient] = "training"
    inputs: ClassVar[tuple[str, ...]] = ("test_data", "test_reference_logprobs")

    async def __call__(
        self,
        client: ForwardClient,
        /,
        *,
        test_data: Sequence[types.Datum] | None,
        test_reference_logprobs: Sequence[Any],
    ) -> dict[str, float]:
        if not test_data:
            return {}
        return await evaluate_preference_async(
            client, test_data, test_reference_logprobs, self.beta, self.prefix
        )
