import numpy as np
import pytest
from rl_core_fakes import single_turn_group, transition
from tinker import types

from train_core.completers import TokensWithLogprobs
from train_core.rl.data import (
    assemble_training_data,
    datum_for_loss,
    keep_informative_groups,
    remove_constant_reward_groups,
    trajectory_to_data,
)
from train_core.rl.types import PARSE_ERROR_MASKED_METRIC_KEY, Trajectory, Transition


def traj(*transitions: Transition) -> Trajectory:
    return Trajectory(list(transitions), types.ModelInput.empty())


def columns(datum: types.Datum) -> dict[str, list[float]]:
    cols = {k: v.to_numpy().tolist() for k, v in datum.loss_fn_inputs.items()}
    cols["input"] = datum.model_input.to_ints()
    return cols


def test_single_turn_datum_is_shifted_and_only_action_tokens_carry_advantage():
    (datum,) = trajectory_to_data(traj(transition([1, 2, 3], [7, 8], logprob=-0.5)), 0.75)
    cols = columns(datum)
    assert cols["input"] == [1, 2, 3, 7]
    assert cols["target_tokens"] == [2, 3, 7, 8]
    assert cols["logprobs"] == [0.0, 0.0, -0.5, -0.5]
    assert cols["advantages"] == [0.0, 0.0, 0.75, 0.75]
    assert cols["mask"] == [0.0, 0.0, 1.0, 1.0]
    assert datum.loss_fn_inputs["target_tokens"].dtype == "int64"
    assert datum.loss_fn_inputs["advantages"].dtype == "float32"


def test_multi_turn_observation_extending_the_sequence_merges_into_one_datum():
    t1 = transition([1, 2, 3], [7, 8], logprob=-0.5)
    t2 = transition([1, 2, 3, 7, 8, 50], [9], logprob=-0.25)
    (datum,) = trajectory_to_data(traj(t1, t2), 1.0)
    cols = columns(datum)
    assert cols["input"] == [1, 2, 3, 7, 8, 50]
    assert cols["target_tokens"] == [2, 3, 7, 8, 50, 9]
    assert cols["mask"] == [0, 0, 1, 1, 0, 1]
    assert cols["logprobs"] == [0, 0, -0.5, -0.5, 0, -0.25]
    assert cols["advantages"] == [0, 0, 1, 1, 0, 1]


def test_observation_that_is_not_an_extension_starts_a_new_datum():
    t1 = transition([1, 2, 3], [7, 8])
    t2 = transition([1, 2, 4, 7, 8, 50], [9])  # history rewritten: token 3 became 4
    t3 = transition([1, 2, 4, 7, 8, 50, 9, 51], [6])
    first, second = trajectory_to_data(traj(t1, t2, t3), -1.0)
    assert columns(first)["target_tokens"] == [2, 3, 7, 8]
    second_cols = columns(second)
    assert second_cols["input"] == [1, 2, 4, 7, 8, 50, 9, 51]
    assert second_cols["mask"] == [0, 0, 0, 0, 0, 1, 0, 1]
    assert second_cols["advantages"] == [0, 0, 0, 0, 0, -1, 0, -1]


def test_parse_error_masked_turn_carries_no_loss():
    t1 = transition([1, 2], [7])
    t2 = transition([1, 2, 7, 50], [8, 9], metrics={PARSE_ERROR_MASKED_METRIC_KEY: 1.0})
    (datum,) = trajectory_to_data(traj(t1, t2), 2.0)
    cols = columns(datum)
    assert cols["mask"] == [0, 1, 0, 0, 0]
    assert cols["advantages"] == [0, 2, 0, 0, 0]


def test_empty_overflow_transition_yields_no_datum():
    empty = Transition(
        types.ModelInput.empty(), TokensWithLogprobs([], []), reward=-0.1, episode_done=True
    )
    assert trajectory_to_data(traj(empty), 0.5) == []


def test_image_chunk_is_kept_whole_and_masked():
    image = types.ImageChunk(data=b"\x89PNG", format="png", expected_tokens=3)
    ob = types.ModelInput(
        chunks=[types.EncodedTextChunk(tokens=[1]), image, types.EncodedTextChunk(tokens=[2])]
    )
    t = Transition(ob, TokensWithLogprobs([7], [-1.0]), reward=0.0, episode_done=True)
    (datum,) = trajectory_to_data(traj(t), 1.0)
    assert datum.model_input.length == 5  # 1 + image(3) + 2, the last action token dropped
    assert datum.model_input.chunks[1] == image
    cols = {k: v.to_numpy().tolist() for k, v in datum.loss_fn_inputs.items()}
    assert cols["target_tokens"] == [0, 0, 0, 2, 7]
    assert cols["mask"] == [0, 0, 0, 0, 1]


def test_provenance_tiles_prompt_and_sampled_tokens_when_sequence_ids_exist():
    t1 = transition([1, 2, 3], [7, 8], sequence_id="s1")
    t2 = transition([1, 2, 3, 7, 8, 50], [9], sequence_id="s2")
    (datum,) = trajectory_to_data(traj(t1, t2), 1.0)
    assert datum.loss_fn_input_spans == [
        types.PromptProvenanceSpan(sequence_id="s1", offset=1, length=2),
        types.SampledProvenanceSpan(sequence_id="s1", length=2),
        types.PromptProvenanceSpan(sequence_id="s2", offset=5, length=1),
        types.SampledProvenanceSpan(sequence_id="s2", length=1),
    ]
    assert sum(s.length for s in datum.model_input_spans) == datum.model_input.length
    # One action without an id voids provenance for its datum; so does include_provenance=False.
    (no_id,) = trajectory_to_data(traj(t1, transition([1, 2, 3, 7, 8, 50], [9])), 1.0)
    assert no_id.loss_fn_input_spans is None
    (off,) = trajectory_to_data(traj(t1), 1.0, include_provenance=False)
    assert off.loss_fn_input_spans is None


def test_assemble_training_data_maps_datums_to_group_and_trajectory():
    groups = [single_turn_group([1.0, 0.0]), single_turn_group([0.0, 0.0, 1.0])]
    advantages_P = [np.array([0.5, -0.5]), np.array([-1 / 3, -1 / 3, 2 / 3])]
    data_D, metadata_D = assemble_training_data(groups, advantages_P)
    assert len(data_D) == 5
    assert metadata_D[3] == {"group_idx": 1, "traj_idx": 1}
    adv = data_D[4].loss_fn_inputs["advantages"].to_numpy()
    np.testing.assert_allclose(adv[adv != 0], [2 / 3, 2 / 3], rtol=1e-6)
    with pytest.raises(ValueError, match="one per trajectory"):
        assemble_training_data(groups, [np.zeros(2), np.zeros(2)])


def test_remove_constant_reward_groups_keeps_mixed_groups():
    mixed = single_turn_group([1.0, 0.0])
    constant = single_turn_group([1.0, 1.0])
    assert remove_constant_reward_groups([constant, mixed, constant]) == [mixed]


def test_remove_constant_reward_groups_keeps_one_when_all_are_constant():
    a, b = single_turn_group([0.0, 0.0]), single_turn_group([1.0, 1.0])
    assert remove_constant_reward_groups([a, b]) == [a]
    assert remove_constant_reward_groups([]) == []


def test_keep_informative_groups_keeps_advantages_aligned():
    groups = [single_turn_group([1, 1]), single_turn_group([0, 1]), single_turn_group([2, 0])]
    advantages = [np.zeros(2), np.array([-0.5, 0.5]), np.array([1.0, -1.0])]
    kept, kept_adv = keep_informative_groups(groups, advantages)
    assert kept == groups[1:]
    assert [a.tolist() for a in kept_adv] == [[-0.5, 0.5], [1.0, -1.0]]
    all_constant = [single_turn_group([1, 1]), single_turn_group([0, 0])]
    kept, _ = keep_informative_groups(all_constant, [np.zeros(2), np.zeros(2)])
    assert kept == all_constant[:1]


def test_datum_for_loss_drops_only_the_mask():
    t1 = transition([1, 2, 3], [7, 8], sequence_id="s1")
    (datum,) = trajectory_to_data(traj(t1), 1.0)
    stripped = datum_for_loss(datum, "ppo")
    assert set(stripped.loss_fn_inputs) == {"target_tokens", "logprobs", "advantages"}
    assert stripped.loss_fn_input_spans == datum.loss_fn_input_spans
    assert "mask" in datum.loss_fn_inputs
