"""text_arena: the coordinator's strict alternation under asyncio, the illegal-move penalty,
win/draw/loss rewards, both trajectories in the group, the opponents, and the recipe's runs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cookbook.envs import tictactoe_textarena
from cookbook.envs.text_arena import (
    ILLEGAL_MOVE_REWARD,
    NotYourTurn,
    TwoPlayerCoordinator,
    TwoPlayerGroupBuilder,
)
from cookbook.envs.tictactoe import (
    MinimaxOpponent,
    RandomOpponent,
    TicTacToe,
    board_from_observation,
)
from cookbook.recipes.text_arena import TextArenaConfig
from kitchen.adapters.fake.tokenizer import FakeTokenizer
from kitchen.app.cli import app
from tests.agentic.helpers import runner, two_steps
from train_core.completers import TokensWithLogprobs
from train_core.renderers import get_renderer
from train_core.rl import compute_advantages, do_group_rollout
from train_core.rl.data import trajectory_to_data

TOKENIZER = FakeTokenizer()
RENDERER = get_renderer("chatml", TOKENIZER)


class Script:
    """Plays the next move of `moves` for whichever player asks (self-play: one policy), after
    a random-ish delay so the two players' coroutines interleave; keeps who asked (player 0 is
    the one whose prompt holds `player0_marker`) and what each was shown."""

    def __init__(
        self, moves: list[str], delays: list[float] | None = None, player0_marker: str = "as 'O'"
    ) -> None:
        self.moves, self.delays = list(moves), delays or []
        self.player0_marker = player0_marker
        self.asked_by: list[int] = []
        self.shown: list[str] = []

    async def __call__(self, model_input, stop, *, max_tokens=None):  # type: ignore[no-untyped-def]
        shown = TOKENIZER.decode(model_input.to_ints())
        self.shown.append(shown)
        self.asked_by.append(0 if self.player0_marker in shown else 1)
        if self.delays:
            await asyncio.sleep(self.delays.pop(0))
        tokens = TOKENIZER.encode(self.moves.pop(0) + "<|im_end|>")
        return TokensWithLogprobs(tokens, [-0.1] * len(tokens))


def self_play(  # type: ignore[no-untyped-def]
    moves: list[str],
    delays: list[float] | None = None,
    new_game: Any = TicTacToe,
    player0_marker: str = "as 'O'",
):
    policy = Script(moves, delays, player0_marker)
    builder = TwoPlayerGroupBuilder(RENDERER, new_game=new_game)
    group = asyncio.run(do_group_rollout(builder, policy))  # type: ignore[arg-type]
    return group, policy


def test_self_play_alternates_strictly_and_both_trajectories_are_in_the_group():
    # O takes the top row while X answers in the middle row; delays shuffle who finishes first
    group, policy = self_play(["[0]", "[3]", "[1]", "[4]", "[2]"], [0.03, 0.0, 0.02, 0.01, 0.0])
    assert policy.asked_by == [0, 1, 0, 1, 0]
    assert len(group.trajectories_G) == 2
    assert [len(t.transitions) for t in group.trajectories_G] == [3, 2]
    assert group.get_total_rewards() == [1.0, -1.0]
    last_o, last_x = (t.transitions[-1].metrics for t in group.trajectories_G)
    assert (last_o["won"], last_x["lost"]) == (1.0, 1.0)


def test_a_draw_rewards_both_players_zero():
    group, _ = self_play(["[4]", "[0]", "[2]", "[6]", "[3]", "[5]", "[1]", "[7]", "[8]"])
    assert group.get_total_rewards() == [0.0, 0.0]
    assert group.trajectories_G[0].transitions[-1].metrics["draw"] == 1.0


@pytest.mark.parametrize("bad", ["I pick the middle", "[4]"])
def test_an_illegal_move_ends_the_game_with_the_penalty_for_its_player_only(bad):
    group, _ = self_play(["[4]", bad])  # X replies without a move, or on O's cell
    assert group.get_total_rewards() == [0.0, ILLEGAL_MOVE_REWARD]
    assert group.trajectories_G[1].transitions[-1].metrics["illegal"] == 1.0


def test_the_reply_of_a_player_whose_game_ended_before_its_first_move_trains_nothing():
    group, _ = self_play(["I pick the middle", "[4]"])  # O's illegal move ends the game at once
    assert group.get_total_rewards() == [ILLEGAL_MOVE_REWARD, 0.0]
    advantages = compute_advantages([group])[0]
    assert advantages.tolist() == [-1.0, 1.0]  # the group mean alone would reward X's reply
    (o_move,), (x_reply,) = (trajectory_to_data(t, float(a))
                             for t, a in zip(group.trajectories_G, advantages, strict=True))  # fmt: skip
    assert sum(o_move.loss_fn_inputs["mask"].data) > 0
    assert sum(x_reply.loss_fn_inputs["mask"].data) == 0.0
    assert set(x_reply.loss_fn_inputs["advantages"].data) == {0.0}


def test_the_coordinator_refuses_a_move_out_of_turn():
    coordinator = TwoPlayerCoordinator()
    with pytest.raises(NotYourTurn, match="player 1 moved, but it is player 0's turn"):
        asyncio.run(coordinator.move(1, "[0]"))


def test_a_waiting_player_wakes_only_on_its_turn():
    async def scenario() -> list[str]:
        coordinator, log = TwoPlayerCoordinator(), []

        async def second() -> None:
            await coordinator.wait_turn(1)
            log.append("1 may move")

        waiter = asyncio.create_task(second())
        await asyncio.sleep(0.01)
        log.append("0 moves")
        await coordinator.move(0, "[4]")
        await waiter
        return log

    assert asyncio.run(scenario()) == ["0 moves", "1 may move"]


def test_minimax_never_loses_to_random_and_blocks_a_threat():
    async def game(seed: int) -> float:
        g, rand, best = TicTacToe(), RandomOpponent(seed), MinimaxOpponent()
        while not g.done:
            mover = best if g.current == seed % 2 else rand
            reply = await mover([{"role": "user", "content": g.observation(g.current)}])
            g.play(reply["content"])  # type: ignore[arg-type]
        return g.outcome(seed % 2)

    assert min(asyncio.run(game(s)) for s in range(12)) >= 0.0
    g = TicTacToe()
    for move in ["[0]", "[4]", "[1]"]:  # O threatens 0-1-2; X must take 2
        g.play(move)
    reply = asyncio.run(MinimaxOpponent()([{"role": "user", "content": g.observation(1)}]))
    assert reply["content"] == "[2]"
    assert board_from_observation(g.observation(1))[0][:3] == ["O", "O", " "]


def test_against_an_opponent_the_policy_plays_both_sides_in_two_games():
    builder = TwoPlayerGroupBuilder(RENDERER, MinimaxOpponent(), "versus")
    policy = Script(["hmm"] * 2)
    group = asyncio.run(do_group_rollout(builder, policy))  # type: ignore[arg-type]
    assert group.get_total_rewards() == [ILLEGAL_MOVE_REWARD, ILLEGAL_MOVE_REWARD]
    assert policy.asked_by == [0, 1] or policy.asked_by == [1, 0]


def test_the_default_game_is_textarenas_and_takes_two_players():
    assert TextArenaConfig().game == "textarena"
    result = runner.invoke(app, ["run", "text_arena", "--dry-run", "--group-size", "4"])
    assert result.exit_code == 2 and "2 players" in result.output


def test_a_run_of_game_textarena_without_the_package_stops_on_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(tictactoe_textarena, "find_spec", lambda name: None)
    result = runner.invoke(app, ["run", "text_arena", "--backend", "fake", "--no-progress",
                                 "--log-dir", str(tmp_path / "run")])  # fmt: skip
    assert result.exit_code != 0
    (line,) = [ln for ln in result.output.splitlines() if ln.strip()]
    assert "game=textarena: the textarena package is not installed" in line
    assert "Makefile" in line and "--game builtin" in line


@pytest.mark.slow
def test_two_steps_on_the_tiny_model(tmp_path):
    train = two_steps("text_arena", tmp_path, group_size=2, max_tokens=4, num_test_games=2,
                      eval_every=1, test_opponent="base_model", game="builtin")  # fmt: skip
    assert all(r["env/all/total_episodes"] == 4 for r in train)
