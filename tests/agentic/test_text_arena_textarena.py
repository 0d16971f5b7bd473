"""text_arena through the `textarena` package's TicTacToe-v0 (the recipe's default game): whole
self-play games with scripted moves (a win, a draw, illegal moves at -2 where textarena itself
would have asked again), the coordinator's alternation over textarena's turn, the opponents
reading textarena's observation, `kitchen play`'s loop on it, and a 2-step run."""

from __future__ import annotations

import asyncio
from functools import partial

import pytest

pytest.importorskip(
    "textarena", reason="textarena is not installed (the Makefile's install line pins it)"
)

from cookbook.envs.text_arena import (
    ILLEGAL_MOVE_REWARD,
    NotYourTurn,
    TwoPlayerCoordinator,
    TwoPlayerGroupBuilder,
    player_reward,
)
from cookbook.envs.text_arena_play import play_game
from cookbook.envs.tictactoe import (
    MinimaxOpponent,
    RandomOpponent,
    board_from_observation,
)
from cookbook.envs.tictactoe_games import GAMES
from cookbook.envs.tictactoe_textarena import TextArenaTicTacToe
from tests.agentic.helpers import two_steps
from tests.agentic.test_text_arena import RENDERER, Script
from tests.agentic.test_text_arena import self_play as arena_self_play
from train_core.renderers.content import get_text_content
from train_core.rl import do_group_rollout

# textarena's rules text names player 0 so.
PLAYER_0 = "You are Player 0 in Tic Tac Toe"
self_play = partial(arena_self_play, new_game=TextArenaTicTacToe, player0_marker=PLAYER_0)


def test_a_won_game_alternates_strictly_and_shows_textarenas_observation():
    group, policy = self_play(["[0]", "[3]", "[1]", "[4]", "[2]"], [0.03, 0.0, 0.02, 0.01, 0.0])
    assert policy.asked_by == [0, 1, 0, 1, 0]
    assert group.get_total_rewards() == [1.0, -1.0]
    assert [len(t.transitions) for t in group.trajectories_G] == [3, 2]
    last_o, last_x = (t.transitions[-1].metrics for t in group.trajectories_G)
    assert (last_o["won"], last_x["lost"], last_o["moves"]) == (1.0, 1.0, 3.0)
    # X's second turn: textarena's running log, the rules, O's moves and the board so far
    second_x = policy.shown[3]
    assert "As Player 1, you will be 'X', while your opponent is 'O'." in second_x
    assert "[GAME] Player 0 placed their symbol (O) in cell 1." in second_x
    assert " O | O | 2 \n---+---+---\n X | 4 | 5 " in second_x
    assert "Available Moves: '[2]', '[4]', '[5]', '[6]', '[7]', '[8]'" in second_x


def test_a_draw_is_zero_for_both():
    group, _ = self_play(["[4]", "[0]", "[2]", "[6]", "[3]", "[5]", "[1]", "[7]", "[8]"])
    assert group.get_total_rewards() == [0.0, 0.0]
    assert all(t.transitions[-1].metrics["draw"] == 1.0 for t in group.trajectories_G)


@pytest.mark.parametrize("bad", ["I pick the middle", "[4]", "[9]", ""])
def test_an_illegal_move_ends_the_game_at_minus_two_where_textarena_would_ask_again(bad):
    group, policy = self_play(["[4]", bad])
    assert group.get_total_rewards() == [0.0, ILLEGAL_MOVE_REWARD]
    assert group.trajectories_G[1].transitions[-1].metrics["illegal"] == 1.0
    assert len(policy.asked_by) == 2  # no second chance


def test_a_bare_number_is_a_move_in_textarena():
    # textarena wraps a reply with no bracket in one: `4` is `[4]` (the built-in game refuses it)
    game = TextArenaTicTacToe()
    assert game.play("4") and game.board[4] == "O" and game.current == 1
    assert game.play("X takes [ 0 ] then") and game.board[0] == "X"


def test_the_coordinator_alternates_over_textarenas_turn():
    async def scenario() -> list[str]:
        coordinator, log = TwoPlayerCoordinator(TextArenaTicTacToe()), []

        async def second() -> None:
            await coordinator.wait_turn(1)
            log.append(f"1 may move, sees {board_from_observation(coordinator.game.observation(1))[0][4]}")  # fmt: skip

        waiter = asyncio.create_task(second())
        await asyncio.sleep(0.01)
        log.append("0 moves")
        with pytest.raises(NotYourTurn, match="player 1 moved, but it is player 0's turn"):
            await coordinator.move(1, "[0]")
        assert await coordinator.move(0, "[4]")
        await waiter
        return log

    assert asyncio.run(scenario()) == ["0 moves", "1 may move, sees O"]


def test_the_game_shows_only_the_player_to_move_until_it_is_over():
    game = TextArenaTicTacToe()
    with pytest.raises(RuntimeError, match="player 0's observation, not player 1's"):
        game.observation(1)
    assert not game.play("no move")  # O's illegal first move ends it; textarena keeps O to move
    assert game.done and game.current == 0
    seen_by_x = game.observation(1)
    assert "you will be 'X'" in seen_by_x and "[Player 0] [no move]" in seen_by_x
    assert "you will be 'O'" in game.observation(0) and game.current == 0


def test_player_ones_game_can_end_before_its_first_move():
    # O forfeits; X is shown its own observation of the finished game, and its reply plays nothing
    group, policy = self_play(["I move to the centre", "[4]"])
    assert group.get_total_rewards() == [ILLEGAL_MOVE_REWARD, 0.0]
    assert policy.asked_by == [0, 1] and "you will be 'X'" in policy.shown[1]
    assert [len(t.transitions) for t in group.trajectories_G] == [1, 1]


def test_the_opponents_read_textarenas_observation():
    game = TextArenaTicTacToe()
    for move in ["[0]", "[4]", "[1]"]:  # O threatens 0-1-2; X must take 2
        game.play(move)
    seen = [{"role": "user", "content": game.observation(1)}]
    assert asyncio.run(MinimaxOpponent()(seen))["content"] == "[2]"  # type: ignore[arg-type]

    async def versus_random(seed: int) -> float:
        g, rand, best, me = TextArenaTicTacToe(), RandomOpponent(seed), MinimaxOpponent(), seed % 2
        while not g.done:
            mover = best if g.current == me else rand
            reply = await mover([{"role": "user", "content": g.observation(g.current)}])
            assert g.play(get_text_content(reply))
        return player_reward(g, me)

    assert min(asyncio.run(versus_random(s)) for s in range(6)) >= 0.0


def test_the_versus_groups_play_textarena_games():
    builder = TwoPlayerGroupBuilder(RENDERER, MinimaxOpponent(), "versus", TextArenaTicTacToe)
    policy = Script(["hmm"] * 2, player0_marker=PLAYER_0)
    group = asyncio.run(do_group_rollout(builder, policy))  # type: ignore[arg-type]
    assert group.get_total_rewards() == [ILLEGAL_MOVE_REWARD, ILLEGAL_MOVE_REWARD]
    assert sorted(policy.asked_by) == [0, 1]


def test_kitchen_plays_loop_runs_a_textarena_game():
    seen: list[str] = []

    async def policy(messages):  # type: ignore[no-untyped-def]
        seen.append(get_text_content(messages[-1]))
        return {"role": "assistant", "content": ["[3]", "[4]"][len(seen) - 1]}

    typed, shown = ["0", "1", "2"], []
    game = asyncio.run(play_game(policy, lambda _: typed.pop(0), shown.append, 0, GAMES["textarena"]))  # fmt: skip
    assert game.won_by == 0 and game.board[:3] == ["O", "O", "O"]
    assert "You are Player 1 in Tic Tac Toe." in seen[0] and "in cell 0." in seen[0]
    assert "".join(shown).endswith("you win (rewards as the env gives them: you +1, the policy -1)\n")  # fmt: skip


def test_kitchen_play_text_arena_plays_textarena_by_default_against_tiny_llama():
    from typer.testing import CliRunner

    from kitchen.app.cli import app
    from kitchen.engine.plugins import ENVS
    from tests.play.test_play_text_arena import PERSON_MOVES

    assert ENVS.get("text_arena")().game == "textarena"
    typed = "\n".join(PERSON_MOVES) + "\n"
    result = CliRunner().invoke(app, ["play", "text_arena", "--model", "kitchen/tiny-llama"], input=typed)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output.startswith("You play O (player 0); the policy plays X.")
    assert "your move> you (O): [4]\npolicy (X): " in result.output
    assert result.output.splitlines()[-1].startswith("game over: ")


@pytest.mark.slow
def test_two_steps_on_the_tiny_model_through_textarena(tmp_path):
    train = two_steps("text_arena", tmp_path, group_size=2, max_tokens=4, num_test_games=2,
                      eval_every=1, test_opponent="random", game="textarena")  # fmt: skip
    assert all(r["env/all/total_episodes"] == 4 for r in train)
    assert all(0.0 <= r["env/all/illegal"] <= 1.0 for r in train)
