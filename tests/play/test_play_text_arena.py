"""`kitchen play text_arena`: a person against a policy at tic-tac-toe. The game loop with a
scripted policy (wins, a draw, the person's typos asked again, the policy's illegal move ending
the game as in training), where the policy's weights come from, and whole games at the CLI
against tiny-llama and a trained run's checkpoint, from scripted stdin and under tmux."""

from __future__ import annotations

import ast
import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cookbook.envs.text_arena import ILLEGAL_MOVE_REWARD, player_reward
from cookbook.envs.text_arena_play import TicTacToeVersus, outcome_line, play_game
from cookbook.envs.tictactoe import TicTacToe
from kitchen.app.cli import app
from kitchen.app.play import is_game, open_policy
from kitchen.engine.errors import ConfigError, DataError
from kitchen.engine.plugins import ENVS
from tests.play.test_play import KITCHEN, Pane, needs_tmux
from train_core.renderers.content import get_text_content
from train_core.renderers.types import Message

PERSON_MOVES = [str(c) for c in (4, 0, 1, 2, 3, 5, 6, 7, 8)]  # re-asked past a taken cell


class ScriptedPolicy:
    """Replies `replies` in order and keeps what it was shown."""

    def __init__(self, replies: list[str]) -> None:
        self.replies, self.seen = list(replies), []

    async def __call__(self, messages: list[Message]) -> Message:
        self.seen.append(messages)
        return {"role": "assistant", "content": self.replies.pop(0)}


def play(replies: list[str], typed: list[str], person: int = 0):  # type: ignore[no-untyped-def]
    shown: list[str] = []
    queue = list(typed)

    def read(prompt: str) -> str:
        shown.append(prompt)
        return queue.pop(0)

    policy = ScriptedPolicy(replies)
    game = asyncio.run(play_game(policy, read, shown.append, person))
    return game, "".join(shown), policy


def test_text_arena_is_registered_as_a_game():
    assert ENVS.get("text_arena") is TicTacToeVersus
    assert is_game(TicTacToeVersus()) and not is_game(ENVS.get("arithmetic"))


def test_the_person_wins_a_row_and_the_policy_sees_its_training_observation():
    game, shown, policy = play(["[3]", "[4]"], ["0", "[1]", " 2 "])
    assert game.won_by == 0 and game.board[:3] == ["O", "O", "O"]
    assert shown.startswith("You play O (player 0); the policy plays X. O moves first.\n")
    assert "0 | 1 | 2\n---------\n3 | 4 | 5\n---------\n6 | 7 | 8\nyour move> " in shown
    assert "you (O): [0]\npolicy (X): '[3]'\nO | 1 | 2\n---------\nX | 4 | 5" in shown
    assert shown.endswith(
        "game over: you win (rewards as the env gives them: you +1, the policy -1)\n"
    )
    # what the policy was shown is the player's observation, as in a training game
    first = TicTacToe()
    first.play("[0]")
    assert [get_text_content(m) for m in policy.seen[0]] == [first.observation(1)]


def test_a_typo_or_a_taken_cell_is_asked_again_on_one_line_and_is_no_move():
    game, shown, _ = play(["[0]", "[1]", "[2]"], ["hello", "9", "4", "4", "[0]", "3", "5"])
    lines = shown.splitlines()
    assert "your move> 'hello' is not a cell; type the number of an empty cell: 0, 1, 2, 3, 4, 5, 6, 7, 8" in lines  # fmt: skip
    assert "your move> '9' is not a cell; type the number of an empty cell: 0, 1, 2, 3, 4, 5, 6, 7, 8" in lines  # fmt: skip
    assert "your move> cell 4 is taken; empty cells: 1, 2, 3, 5, 6, 7, 8" in lines
    assert "your move> cell 0 is taken; empty cells: 1, 2, 3, 5, 6, 7, 8" in lines
    assert game.illegal_player is None and game.board[3:6] == ["O", "O", "O"]
    assert shown.count("your move> ") == 7 and game.moves == 5  # 3 by the person, 2 by the policy


@pytest.mark.parametrize("reply", ["[4]", "I take the middle", ""])
def test_the_policys_illegal_move_ends_the_game_with_the_envs_penalty(reply):
    game, shown, _ = play([reply], ["4"])
    assert game.done and game.illegal_player == 1 and game.moves == 1
    assert player_reward(game, 1) == ILLEGAL_MOVE_REWARD and player_reward(game, 0) == 0.0
    assert f"policy (X): {reply!r}\n" in shown
    assert shown.endswith(
        "game over: the policy's move was illegal, which ends the game "
        "(rewards as the env gives them: you 0, the policy -2)\n"
    )


def test_as_x_the_policy_moves_first_and_a_full_board_is_a_draw():
    game, shown, _ = play(["[0]", "[8]", "[7]", "[2]", "[3]"], ["4", "1", "6", "5"], person=1)
    assert shown.startswith("You play X (player 1); the policy plays O.")
    assert shown.index("policy (O): '[0]'") < shown.index("your move> ")
    assert game.board == ["O", "X", "O", "O", "X", "X", "X", "O", "O"] and game.won_by is None
    assert shown.endswith(
        "O | X | O\n---------\nO | X | X\n---------\nX | O | O\n"
        "game over: a draw (rewards as the env gives them: you 0, the policy 0)\n"
    )


def test_a_loss_is_said_and_scored_as_the_env_scores_it():
    game, shown, _ = play(["[3]", "[4]", "[5]"], ["0", "1", "8"])
    assert game.won_by == 1
    assert shown.endswith("game over: the policy wins (rewards as the env gives them: you -1, the policy +1)\n")  # fmt: skip


class RecordingBackend:
    """Records which weights a sampling client was asked for."""

    def __init__(self) -> None:
        self.asked: list[dict[str, str]] = []

    def create_sampling_client(self, **where: str) -> str:
        self.asked.append(where)
        return "client"


def test_the_policy_is_the_base_model_or_a_runs_last_checkpoint(tmp_path):
    backend = RecordingBackend()
    assert open_policy(backend, None, None) == ("client", "kitchen/tiny-llama", None)
    assert backend.asked[-1] == {"base_model": "kitchen/tiny-llama"}
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"recipe": "text_arena",
                                                 "config": {"model_name": "kitchen/tiny-qwen"}}))  # fmt: skip
    records = [{"name": "000010", "state_path": "/w/10", "sampler_path": "/s/10", "step": 10,
                "renderer_name": "chatml"},
               {"name": "final", "state_path": "/w/f", "sampler_path": "/s/f", "step": 20,
                "renderer_name": "chatml"}]  # fmt: skip
    (run / "checkpoints.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert open_policy(backend, None, str(run)) == ("client", "kitchen/tiny-qwen", "chatml")
    assert backend.asked[-1] == {"model_path": "/s/f"}
    assert open_policy(backend, "base/x", "tinker://run/sampler_weights/final")[1] == "base/x"
    with pytest.raises(ConfigError, match="name its base model with --model"):
        open_policy(backend, None, "tinker://run/sampler_weights/final")
    (run / "config.json").unlink()  # a run written by another tool: its model must be named
    with pytest.raises(DataError, match="names no model_name; give the run's base model with --model"):  # fmt: skip
        open_policy(backend, None, str(run))
    assert open_policy(backend, "kitchen/tiny-qwen", str(run))[1] == "kitchen/tiny-qwen"
    (run / "checkpoints.jsonl").write_text("")
    with pytest.raises(DataError, match="the run saved no checkpoint yet"):
        open_policy(backend, None, str(run))


def replayed(output: str, person: int = 0) -> TicTacToe:
    """The game the printed moves make, replayed: the person's `[N]`, the policy's replies."""
    game = TicTacToe()
    for shown in output.splitlines():
        line = shown.removeprefix("your move> ")  # stdin typed, not echoed: the prompt stays
        if line.startswith("you ("):
            game.play(line.split(": ", 1)[1])
        elif line.startswith("policy ("):
            game.play(ast.literal_eval(line.split(": ", 1)[1]))
    return game


def play_at_the_cli(*args: str) -> str:
    result = CliRunner().invoke(
        app,
        ["play", "text_arena", "--game", "builtin", *args],
        input="\n".join(PERSON_MOVES) + "\n",
    )
    assert result.exit_code == 0, result.output
    return result.output


def assert_a_whole_game(output: str) -> None:
    assert output.startswith("You play O (player 0); the policy plays X.")
    assert "0 | 1 | 2\n---------\n3 | 4 | 5\n---------\n6 | 7 | 8\nyour move> " in output
    assert "your move> you (O): [4]\npolicy (X): " in output
    game = replayed(output)
    assert game.done  # the printed moves are a finished game, and the verdict is its own
    assert output.endswith(outcome_line(game, 0))


def test_a_whole_game_against_tiny_llama_from_scripted_stdin():
    assert_a_whole_game(play_at_the_cli("--model", "kitchen/tiny-llama"))


@pytest.mark.slow  # a 2-step training run
def test_a_whole_game_against_a_trained_runs_checkpoint(tmp_path):
    from tests.agentic.helpers import two_steps

    two_steps("text_arena", tmp_path / "run", game="builtin")  # its final checkpoint
    output = play_at_the_cli("--checkpoint", str(tmp_path / "run"), "--temperature", "1")
    assert_a_whole_game(output)


@pytest.mark.slow  # launches a process
@needs_tmux
def test_a_game_in_a_terminal_under_tmux(tmp_path: Path):
    pane = Pane(
        f"{KITCHEN} play text_arena --game builtin --model kitchen/tiny-llama; echo EXIT=$?; sleep 60"
    )
    try:
        for n, cell in enumerate(PERSON_MOVES, start=1):
            text = pane.wait_for(lambda t, n=n: "EXIT=" in t or t.count("your move>") >= n)
            if "EXIT=" in text:
                break
            pane.type(cell)
        text = pane.wait_for(lambda t: "EXIT=" in t)
        (tmp_path / "pane.txt").write_text(text)
        assert "your move> 4" in text and "game over: " in text and "EXIT=0" in text
    finally:
        pane.close()
