"""A person against a policy at tic-tac-toe: `kitchen play text_arena`. The person types a cell
(`4` or `[4]`); a reply that is not an empty cell is asked again with a one-line reason, since a
person's typo is not a move. The policy moves as in training (cookbook/envs/text_arena.py): it
sees its player's observation, and a reply the game refuses ends the game, -2 to it. The game is
textarena's TicTacToe-v0 (`--game textarena`, the default, as the recipe's) or the built-in one
(`--game builtin`); play the one the policy trained on.

`TicTacToeVersus` is the `kitchen.envs` entry: its fields are the options
(`kitchen play text_arena --play-as X`), and `kitchen play` hands its `versus` method a sampling
client of the policy (a base model or a run's checkpoint) and the terminal.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from cookbook.envs.text_arena import Opponent, TwoPlayerCoordinator, opponent_moves, player_reward
from cookbook.envs.tictactoe import SYMBOLS, TicTacToe, board_text
from cookbook.envs.tictactoe_games import GameName, TwoPlayerGame, new_game_factory
from train_core.completers import TinkerMessageCompleter

_CELL = re.compile(r"\[?\s*(\d+)\s*\]?")


def ask_cell(game: TwoPlayerGame, read: Callable[[str], str], write: Callable[[str], None]) -> int:
    """The person's move: asked again, with the reason on one line, until it is an empty cell."""
    while True:
        text = read("your move> ").strip()
        match = _CELL.fullmatch(text)
        empty = ", ".join(map(str, game.legal()))
        if match is None or not 0 <= int(match.group(1)) <= 8:
            write(f"{text!r} is not a cell; type the number of an empty cell: {empty}\n")
        elif int(match.group(1)) not in game.legal():
            write(f"cell {match.group(1)} is taken; empty cells: {empty}\n")
        else:
            return int(match.group(1))


def outcome_line(game: TwoPlayerGame, person: int) -> str:
    """How the game ended, in words and in the rewards the env gives each side."""
    policy = 1 - person
    if game.illegal_player == policy:
        how = "the policy's move was illegal, which ends the game"
    elif game.won_by == person:
        how = "you win"
    elif game.won_by == policy:
        how = "the policy wins"
    else:
        how = "a draw"
    you, it = (f"{r:+g}" if r else "0" for r in (player_reward(game, p) for p in (person, policy)))
    rewards = f"you {you}, the policy {it}"
    return f"game over: {how} (rewards as the env gives them: {rewards})\n"


async def play_game(
    policy: Opponent,
    read: Callable[[str], str],
    write: Callable[[str], None],
    person: int = 0,
    new_game: Callable[[], TwoPlayerGame] = TicTacToe,
) -> TwoPlayerGame:
    """One game of `new_game`, `person` (0: O, moving first; 1: X) at the terminal against
    `policy`; returns the finished game."""
    coordinator = TwoPlayerCoordinator(new_game())
    game, other = coordinator.game, 1 - person
    write(f"You play {SYMBOLS[person]} (player {person}); the policy plays {SYMBOLS[other]}. "
          "O moves first.\n")  # fmt: skip
    while not game.done:
        if game.current == person:
            write(board_text(game.board) + "\n")
            cell = ask_cell(game, read, write)
            await coordinator.move(person, f"[{cell}]")
            write(f"you ({SYMBOLS[person]}): [{cell}]\n")
        else:
            reply = await opponent_moves(policy, coordinator, other)
            write(f"policy ({SYMBOLS[other]}): {reply!r}\n")
    write(board_text(game.board) + "\n" + outcome_line(game, person))
    return game


@dataclass(frozen=True)
class TicTacToeVersus:
    """`kitchen play text_arena`: you against the policy; the options are these fields."""

    play_as: Literal["O", "X"] = "O"
    game: GameName = "textarena"  # as the recipe's --game
    max_tokens: int = 8  # the recipe's tokens per move
    temperature: float = 0.0  # greedy, as the recipe's test games (eval_temperature)

    async def versus(
        self,
        sampling_client: Any,
        context: Any,
        read: Callable[[str], str],
        write: Callable[[str], None],
    ) -> TwoPlayerGame:
        """A game against `sampling_client` in `context.renderer`, the policy's chat format."""
        new_game = new_game_factory(self.game)
        policy = TinkerMessageCompleter(
            sampling_client, context.renderer, self.max_tokens, temperature=self.temperature
        )
        return await play_game(policy, read, write, SYMBOLS.index(self.play_as), new_game)
