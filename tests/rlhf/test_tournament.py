"""Tournament pairings and the group rewards they yield, against direct formulas."""

from __future__ import annotations

import numpy as np
import pytest

from train_core.preference.tournament import get_pairs, get_pairs_chunked, pairwise_group_rewards


def test_one_way_pairs_each_unordered_pair_once():
    assert get_pairs(4, "all_pairs_one_way") == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]


def test_both_ways_pairs_each_pair_in_both_slot_orders():
    pairs = get_pairs(3, "all_pairs_both_ways")
    assert sorted(pairs) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]


def test_chunked_pairs_stay_within_chunks():
    assert get_pairs_chunked(6, "all_pairs_one_way", 3) == [
        (0, 1), (0, 2), (1, 2), (3, 4), (3, 5), (4, 5),
    ]  # fmt: skip
    assert get_pairs_chunked(5, "all_pairs_one_way", 4)[-1] == (2, 3)  # the last chunk is {4}


def test_unknown_pattern_is_a_clear_error():
    with pytest.raises(ValueError, match="all_pairs_one_way"):
        get_pairs(3, "round_robin")  # type: ignore[arg-type]


def test_group_rewards_are_mean_wins_minus_losses():
    pairs = get_pairs(3, "all_pairs_one_way")  # (0,1), (0,2), (1,2)
    prob_a = [0.9, 0.5, 0.2]  # 0 beats 1; 0 ties 2; 2 beats 1
    rewards, wml = pairwise_group_rewards(3, pairs, prob_a)
    s = [1 - 2 * p for p in prob_a]  # the B side's score of each matchup
    direct = [(-s[0] - s[1]) / 2, (s[0] - s[2]) / 2, (s[1] + s[2]) / 2]
    np.testing.assert_allclose(wml, direct)
    np.testing.assert_allclose(rewards, direct)
    assert wml[0] > wml[2] > wml[1]


def test_a_malformed_answer_loses_the_format_coefficient():
    rewards, wml = pairwise_group_rewards(
        2, [(0, 1)], [0.5], valid_G=[True, False], format_coef=1.0
    )
    np.testing.assert_allclose(rewards, [0.0, -1.0])
    np.testing.assert_allclose(wml, [0.0, 0.0])
