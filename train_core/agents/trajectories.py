"""One rollout's recorded calls -> a Trajectory that trains on exactly the tokens the sampler saw.

A call becomes a Transition: its prompt tokens are the observation, its sampled tokens (with the
sampler's logprobs and stop reason) the action; the episode's reward sits on the last one.
`trajectory_to_data` then merges the calls into one datum while each prompt extends the previous
prompt + sampled tokens, and starts a new datum where one does not: a split, counted here from the
records' own `extends_previous`, never repaired by re-tokenizing.
"""

from __future__ import annotations

from collections.abc import Sequence

from tinker import types

from train_core.agents.records import CallRecord
from train_core.completers import TokensWithLogprobs
from train_core.rl.types import Trajectory, Transition


def records_to_trajectory(records: Sequence[CallRecord], reward: float) -> Trajectory:
    """A Transition per call, in call order; `reward` on the last (the others earn 0)."""
    if not records:
        raise ValueError("records_to_trajectory: the rollout made no calls; nothing to train on")
    transitions = [
        Transition(
            ob=types.ModelInput.from_ints(list(record.prompt_tokens)),
            ac=TokensWithLogprobs(
                tokens=list(record.sampled_tokens),
                maybe_logprobs=list(record.sampled_logprobs),
                stop_reason=_stop_reason(record),
            ),
            reward=float(reward) if last else 0.0,
            episode_done=last,
        )
        for last, record in ((i == len(records) - 1, r) for i, r in enumerate(records))
    ]
    return Trajectory(transitions=transitions, final_ob=types.ModelInput.empty())


def count_splits(records: Sequence[CallRecord]) -> int:
    """Calls after the first whose prompt did not extend the previous call's: each starts a datum."""
    return sum(1 for record in records[1:] if not record.extends_previous)


def _stop_reason(record: CallRecord) -> types.StopReason:
    # Tinker's two reasons; a gateway route's own words ("tool_calls", "end_turn") mean "stop".
    return "length" if record.stop_reason == "length" else "stop"
