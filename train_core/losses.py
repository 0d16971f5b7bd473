"""Tinker's built-in losses (cross_entropy, importance_sampling, ppo, cispo, dro, gspo,
stable_reinforce) as elementwise functions over torch tensors; formulas and config keys from the
Tinker docs, "Loss Functions" pages. `LOSSES` is the one table of their names: the local engine
(kitchen/adapters/local/train/forward.py) and the fake backend run its formulas, and the RL config's
`loss_fn` takes a `PolicyLoss`, a name the table holds.

Every function takes the learner's target logprobs `lp` (shape [B, T], or [B, T, K] for
cross_entropy with K targets per position), the padded `loss_fn_inputs` of the batch and the
`loss_fn_config`, and returns the elementwise loss, same shape as `lp`. The caller masks padding and
sums: Tinker's reductions are plain sums over tokens and data (`loss:sum`), never means.

`logprobs` in loss_fn_inputs are the sampler's logprobs q; `lp` is log p_theta. The formulas use
tensor methods, so this module imports nothing heavy: the two helpers that need the torch module
(`clamp` with per-token thresholds, `minimum`) import it when called, and train_core stays
importable without torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, get_args

from tinker import types

Tensor = Any  # torch.Tensor (not imported here: see the module doc)
LossFn = Callable[[Tensor, Mapping[str, Tensor], Mapping[str, float]], Tensor]
# forward_backward_custom's loss: (data, target logprobs per datum) -> (scalar loss, metrics)
CustomLossFn = Callable[[list[types.Datum], list[Tensor]], tuple[Tensor, dict[str, float]]]

# Tinker's documented defaults: ratio clipped to [1 - 0.2, 1 + 0.2]. The docs give no DRO default;
# 0.05 is the value their example passes.
DEFAULT_CLIP_LOW = 0.8
DEFAULT_CLIP_HIGH = 1.2
DEFAULT_DRO_BETA = 0.05
# stable_reinforce: tinker-cookbook 0.6.1 documents a sampler KL term of kl_coeff = 0.01 by default;
# the ratio cap is Kitchen's choice (truncated importance sampling's usual 2).
DEFAULT_KL_COEFF = 0.01
DEFAULT_RATIO_CAP = 2.0


def cross_entropy(lp: Tensor, inputs: Mapping[str, Tensor], config: Mapping[str, float]) -> Tensor:
    """-(weights * log p(target)); weights 0 on prompt tokens."""
    return -(inputs["weights"] * lp)


def importance_sampling(
    lp: Tensor, inputs: Mapping[str, Tensor], config: Mapping[str, float]
) -> Tensor:
    """-(p/q * A): REINFORCE corrected for the sampler differing from the learner."""
    ratio = (lp - inputs["logprobs"]).exp()
    return -(ratio * inputs["advantages"])


def ppo(lp: Tensor, inputs: Mapping[str, Tensor], config: Mapping[str, float]) -> Tensor:
    """-min(r * A, clip(r, low, high) * A), token-wise."""
    ratio = (lp - inputs["logprobs"]).exp()
    low, high = clip_thresholds(inputs, config)
    clipped = clamp(ratio, low, high)
    advantages = inputs["advantages"]
    return -minimum(ratio * advantages, clipped * advantages)


def cispo(lp: Tensor, inputs: Mapping[str, Tensor], config: Mapping[str, float]) -> Tensor:
    """-(sg(clip(r, low, high)) * log p * A): the clipped ratio only weights the policy gradient."""
    ratio = (lp - inputs["logprobs"]).exp()
    low, high = clip_thresholds(inputs, config)
    return -(clamp(ratio, low, high).detach() * lp * inputs["advantages"])


def dro(lp: Tensor, inputs: Mapping[str, Tensor], config: Mapping[str, float]) -> Tensor:
    """-(log p * A - beta/2 * (log p - log q)^2)."""
    beta = float(config.get("beta", DEFAULT_DRO_BETA))
    return -(lp * inputs["advantages"] - 0.5 * beta * (lp - inputs["logprobs"]) ** 2)


def gspo(lp: Tensor, inputs: Mapping[str, Tensor], config: Mapping[str, float]) -> Tensor:
    """GSPO-token: each token carries its sequence's geometric-mean ratio (over the sampled tokens
    `sequence_ratio_mask` marks) as value and its own log-prob's gradient; then PPO's clipped min."""
    in_ratio = (inputs["sequence_ratio_mask"] != 0).to(lp.dtype)
    log_ratio_tokens = (lp.detach() - inputs["logprobs"]) * in_ratio
    seq_log_ratio = log_ratio_tokens.sum(-1, keepdim=True) / in_ratio.sum(
        -1, keepdim=True
    ).clamp_min(1.0)
    ratio = (seq_log_ratio + lp - lp.detach()).exp()
    low, high = clip_thresholds(inputs, config)
    advantages = inputs["advantages"]
    return -minimum(ratio * advantages, clamp(ratio, low, high) * advantages)


def stable_reinforce(
    lp: Tensor, inputs: Mapping[str, Tensor], config: Mapping[str, float]
) -> Tensor:
    """On sampled positions (`sampled_mask`, from the sampler's stability records,
    kitchen/adapters/local/train/stability.py):
    -(sg(min(p/q, ratio_cap)) * log p * A) + kl_coeff * (p/q - 1 - log(p/q)).

    REINFORCE weighted by the truncated importance ratio (bounded however stale the sampler), plus
    the k3 estimate of KL(sampler || learner), zero with a zero gradient while the two agree."""
    log_ratio = lp - inputs["logprobs"]
    cap = float(config.get("ratio_cap", DEFAULT_RATIO_CAP))
    weight = log_ratio.detach().exp().clamp(max=cap)
    kl = log_ratio.exp() - 1 - log_ratio
    kl_coeff = float(config.get("kl_coeff", DEFAULT_KL_COEFF))
    return inputs["sampled_mask"] * (-(weight * lp * inputs["advantages"]) + kl_coeff * kl)


def clip_thresholds(inputs: Mapping[str, Tensor], config: Mapping[str, float]) -> tuple[Any, Any]:
    """Per-token thresholds from loss_fn_inputs if the datum has them, else loss_fn_config, else 0.8/1.2."""
    low = inputs.get("clip_low_threshold", config.get("clip_low_threshold", DEFAULT_CLIP_LOW))
    high = inputs.get("clip_high_threshold", config.get("clip_high_threshold", DEFAULT_CLIP_HIGH))
    return low, high


def clamp(x: Tensor, low: Any, high: Any) -> Tensor:
    import torch

    if isinstance(low, float | int) and isinstance(high, float | int):
        return x.clamp(float(low), float(high))
    low_t = torch.as_tensor(low, dtype=x.dtype, device=x.device)
    high_t = torch.as_tensor(high, dtype=x.dtype, device=x.device)
    return torch.minimum(torch.maximum(x, low_t), high_t)


def clipped(lp: Tensor, inputs: Mapping[str, Tensor], config: Mapping[str, float]) -> Tensor:
    """1.0 where the ratio p/q lies outside [low, high] (the clip is active), else 0.0."""
    ratio = (lp - inputs["logprobs"]).exp()
    low, high = clip_thresholds(inputs, config)
    return ((ratio < low) | (ratio > high)).float()


# Diagnostics of the clipped losses, reported beside loss:sum as `NAME:mean` over the sampled
# tokens (a nonzero sampler logprob q; prompt positions carry q = 0, not a logprob).
TOKEN_METRICS: dict[str, dict[str, LossFn]] = {
    "ppo": {"clip_fraction": clipped, "policy_loss": ppo},
    "cispo": {"clip_fraction": clipped, "policy_loss": cispo},
}


def minimum(a: Tensor, b: Tensor) -> Tensor:
    import torch

    return torch.minimum(a, b)


LOSSES: dict[str, LossFn] = {
    "cross_entropy": cross_entropy,
    "importance_sampling": importance_sampling,
    "ppo": ppo,
    "cispo": cispo,
    "dro": dro,
    "gspo": gspo,
    "stable_reinforce": stable_reinforce,
}

# The losses an RL config names: those whose inputs the RL workflow builds from its rollouts.
# stable_reinforce's built-in form reads the sampler's records through provenance spans (the
# served path); a native workflow computes it beside the engine instead (CLIENT_SIDE_LOSSES).
PolicyLoss = Literal["importance_sampling", "ppo", "cispo", "dro", "gspo", "stable_reinforce"]
POLICY_LOSSES: tuple[PolicyLoss, ...] = get_args(PolicyLoss)
if not set(POLICY_LOSSES) <= set(LOSSES):  # a name without a formula fails at import, not in a run
    raise ImportError(f"PolicyLoss names losses LOSSES lacks: {set(POLICY_LOSSES) - set(LOSSES)}")

_RL_INPUTS = ("target_tokens", "logprobs", "advantages")
REQUIRED_INPUTS: dict[str, tuple[str, ...]] = {
    "cross_entropy": ("target_tokens", "weights"),
    **{name: _RL_INPUTS for name in ("importance_sampling", "ppo", "cispo", "dro")},
    "gspo": (*_RL_INPUTS, "sequence_ratio_mask"),
    # logprobs and sampled_mask come from the sampler's records (the engine's stability.py), not the
    # client.
    "stable_reinforce": (*_RL_INPUTS, "sampled_mask"),
}
# Per-token loss_fn_inputs each loss reads besides target_tokens (padded with zeros).
OPTIONAL_INPUTS: dict[str, tuple[str, ...]] = {
    "ppo": ("clip_low_threshold", "clip_high_threshold"),
    "cispo": ("clip_low_threshold", "clip_high_threshold"),
    "gspo": ("clip_low_threshold", "clip_high_threshold"),
}
# The losses whose ratio is clipped to [clip_low_threshold, clip_high_threshold].
CLIPPED_LOSSES = tuple(
    name for name, keys in OPTIONAL_INPUTS.items() if "clip_low_threshold" in keys
)
# The loss_fn_input a loss reads the datum's action mask as (the RL datum's `mask`, which Tinker's
# losses do not take under that name): gspo's sequence ratio spans the sampled tokens only.
# stable_reinforce trains on the sampled positions, the served path's sampled_mask.
MASK_INPUTS: dict[str, str] = {"gspo": "sequence_ratio_mask", "stable_reinforce": "sampled_mask"}


# Per elementwise loss, the loss_fn_input whose zeros leave a position without a gradient (prompt
# tokens: weight or advantage 0): the head is backpropagated only where it is nonzero. dro pulls
# every position towards the sampler, so "_mask" (every real position). gspo is absent: its sequence
# ratio couples a row's positions, so the engine linearises it instead
# (kitchen/adapters/local/train/forward.py).
GRADIENT_GATE: dict[str, str] = {
    "cross_entropy": "weights",
    "importance_sampling": "advantages",
    "ppo": "advantages",
    "cispo": "advantages",
    "dro": "_mask",
    "stable_reinforce": "sampled_mask",
}


def stable_reinforce_beside_the_engine(config: Mapping[str, float] | None) -> CustomLossFn:
    """stable_reinforce as a forward_backward_custom loss, from each datum's own `logprobs` (the
    sampler's, as the rollout kept them) and `sampled_mask`: the native RL workflows' form of it.
    The engine's built-in reads the same two from the sampler's records through the datum's
    provenance, which only a sampler that recorded them (`kitchen serve`, the service) has; the
    sum over datums and tokens is the same."""
    settings = dict(config or {})

    def loss_fn(
        data: list[types.Datum], logprobs_D: list[Tensor]
    ) -> tuple[Tensor, dict[str, float]]:
        import torch  # lazily: see the module doc

        device = logprobs_D[0].device if logprobs_D else "cpu"
        total = torch.zeros((), dtype=torch.float32, device=device)
        for i, (datum, lp_T) in enumerate(zip(data, logprobs_D, strict=True)):
            missing = [
                k for k in REQUIRED_INPUTS["stable_reinforce"] if k not in datum.loss_fn_inputs
            ]
            if missing:
                raise ValueError(f"stable_reinforce: datum {i} has no {', '.join(missing)}")
            inputs = {
                k: torch.as_tensor(
                    datum.loss_fn_inputs[k].to_numpy(), dtype=lp_T.dtype, device=lp_T.device
                )
                for k in ("logprobs", "advantages", "sampled_mask")
            }
            total = total + stable_reinforce(lp_T, inputs, settings).sum()
        return total, {}

    return loss_fn


# Policy losses a native workflow computes beside the engine (forward_backward_custom), by name:
# loss_fn_config -> the custom loss. The others go to forward_backward by name.
CLIENT_SIDE_LOSSES: dict[str, Callable[[Mapping[str, float] | None], CustomLossFn]] = {
    "stable_reinforce": stable_reinforce_beside_the_engine,
}
