"""Tournament pairings within a group of completions, and the group rewards they yield.

As tinker-cookbook's rl/preference_envs: a pair (i, j) puts completion i in slot A and j in slot
B; the judge's preference for B, s = 1 - 2 P(A better) in [-1, 1], counts as a win of j and a
loss of i. A completion's reward is its (wins - losses) averaged over its matchups, minus
format_coef when its response did not end cleanly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

TournamentPattern = Literal["all_pairs_one_way", "all_pairs_both_ways"]
TOURNAMENT_PATTERNS: tuple[str, ...] = get_args(TournamentPattern)
Pair = tuple[int, int]


def get_pairs(n: int, pattern: TournamentPattern) -> list[Pair]:
    """Every unordered pair i < j once (one_way), or every ordered pair i != j (both_ways: each
    pair judged in both slot orders, cancelling the judge's position bias)."""
    if pattern == "all_pairs_one_way":
        return [(i, j) for i in range(n) for j in range(i + 1, n)]
    if pattern == "all_pairs_both_ways":
        return [(i, j) for i in range(n) for j in range(n) if i != j]
    raise ValueError(
        f"tournament pattern {pattern!r}; expected one of {', '.join(TOURNAMENT_PATTERNS)}"
    )


def get_pairs_chunked(n: int, pattern: TournamentPattern, chunk_size: int) -> list[Pair]:
    """`get_pairs` within consecutive chunks of at most `chunk_size` players, so the number of
    judgements grows linearly in n rather than quadratically."""
    if chunk_size < 1:
        raise ValueError(f"tournament chunk_size is {chunk_size}; expected >= 1")
    out: list[Pair] = []
    for start in range(0, n, chunk_size):
        size = min(chunk_size, n - start)
        out += [(start + i, start + j) for i, j in get_pairs(size, pattern)]
    return out


def pairwise_group_rewards(
    num_players: int,
    pairs_M: Sequence[Pair],
    prob_a_better_M: Sequence[float],
    valid_G: Sequence[bool] | None = None,
    format_coef: float = 1.0,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(reward_G, win_minus_loss_G) from M judged matchups; a player in no matchup scores 0."""
    if len(pairs_M) != len(prob_a_better_M):
        raise ValueError(f"{len(pairs_M)} matchups but {len(prob_a_better_M)} judgements")
    total_G = np.zeros(num_players)
    count_G = np.zeros(num_players)
    for (i, j), p_a in zip(pairs_M, prob_a_better_M, strict=True):
        b_score = 1.0 - 2.0 * float(p_a)
        total_G[j] += b_score
        total_G[i] -= b_score
        count_G[[i, j]] += 1
    win_minus_loss_G = np.divide(total_G, count_G, out=np.zeros(num_players), where=count_G > 0)
    valid = np.ones(num_players) if valid_G is None else np.asarray(valid_G, dtype=np.float64)
    return win_minus_loss_G + format_coef * (valid - 1.0), win_minus_loss_G
