"""A rollout's recorded calls become datums that train on exactly the recorded tokens and
logprobs: one datum while every call extends the previous one, a split (counted) where one does
not."""

from __future__ import annotations

import numpy as np

from train_core.agents import CallLog
from train_core.agents.trajectories import count_splits, records_to_trajectory
from train_core.rl import trajectory_to_data


def _log(*calls: tuple[list[int], list[int], list[float]]) -> list:
    log = CallLog()
    for prompt, sampled, logprobs in calls:
        log.add(
            "0-0-0",
            prompt_tokens=prompt,
            sampled_tokens=sampled,
            sampled_logprobs=logprobs,
            stop_reason="stop",
            sampler_version=3,
        )
    return log.take("0-0-0")


def _action(datum) -> tuple[np.ndarray, np.ndarray]:
    mask = datum.loss_fn_inputs["mask"].to_numpy() > 0
    targets = datum.loss_fn_inputs["target_tokens"].to_numpy()[mask]
    logprobs = datum.loss_fn_inputs["logprobs"].to_numpy()[mask]
    return targets, logprobs


def test_a_two_call_episode_whose_second_prompt_extends_the_first_is_one_exact_datum():
    records = _log(
        ([5, 6, 7], [8, 9], [-0.1234567, -2.5]),
        ([5, 6, 7, 8, 9, 10, 11], [12, 13, 14], [-0.3, -1e-7, -7.75]),
    )
    traj = records_to_trajectory(records, reward=1.0)
    (datum,) = trajectory_to_data(traj, 0.5)
    targets, logprobs = _action(datum)
    sampled = [t for r in records for t in r.sampled_tokens]
    recorded = np.asarray([lp for r in records for lp in r.sampled_logprobs], dtype=np.float32)
    assert targets.tolist() == sampled
    assert logprobs.tobytes() == recorded.tobytes()
    # the sequence is the last prompt + its sampled tokens; observation tokens carry no weight
    assert [*datum.model_input.to_ints(), 14] == [5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
    weights = datum.loss_fn_inputs["mask"].to_numpy().tolist()
    assert weights == [0, 0, 1, 1, 0, 0, 1, 1, 1]
    assert [t.reward for t in traj.transitions] == [0.0, 1.0]
    assert count_splits(records) == 0


def test_a_call_that_does_not_extend_starts_a_second_datum_and_counts_one_split():
    records = _log(
        ([5, 6, 7], [8, 9], [-0.5, -0.25]),
        ([5, 6, 99, 10], [12], [-1.5]),  # history re-rendered: not the first prompt + reply
    )
    data = trajectory_to_data(records_to_trajectory(records, reward=0.0), 1.0)
    assert len(data) == 2 and count_splits(records) == 1
    assert [_action(d)[0].tolist() for d in data] == [[8, 9], [12]]
    assert [_action(d)[1].tolist() for d in data] == [[-0.5, -0.25], [-1.5]]
