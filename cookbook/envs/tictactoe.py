"""Tic-tac-toe, built in (the game when the `textarena` package is not installed, and the one
tests play without it): the game, the text a player sees, and the opponents a trained policy is
tested against (random, minimax; they read textarena's observation too). Moves are written `[N]`
for a cell 0..8; a reply with no legal `[N]` is an illegal move.

tinker-cookbook 0.6.1's text_arena plays TextArena's TicTacToe-v0: player 0 is O and moves
first; a win is +1, a loss -1, a draw 0.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from train_core.renderers.content import get_text_content
from train_core.renderers.types import Message

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
SYMBOLS = ("O", "X")
_MOVE = re.compile(r"\[(\d)\]")


def winner(board: list[str]) -> str | None:
    for a, b, c in LINES:
        if board[a] != " " and board[a] == board[b] == board[c]:
            return board[a]
    return None


def board_text(board: list[str]) -> str:
    """Three rows, an empty cell shown as its number: `O | 1 | 2` over `---------` lines."""
    rows = [" | ".join(board[r * 3 + c] if board[r * 3 + c] != " " else str(r * 3 + c)
                       for c in range(3)) for r in range(3)]  # fmt: skip
    return "\n---------\n".join(rows)


def read_move(text: str) -> int | None:
    """The cell of the first `[N]` in a reply, if any."""
    match = _MOVE.search(text)
    return int(match.group(1)) if match else None


@dataclass
class TicTacToe:
    """One game. `play` applies the current player's reply: a legal move passes the turn; an
    illegal one ends the game with that player as `illegal_player`."""

    board: list[str] = field(default_factory=lambda: [" "] * 9)
    current: int = 0
    illegal_player: int | None = None
    moves: int = 0

    def legal(self) -> list[int]:
        return [i for i, c in enumerate(self.board) if c == " "]

    @property
    def won_by(self) -> int | None:
        symbol = winner(self.board)
        return None if symbol is None else SYMBOLS.index(symbol)

    @property
    def done(self) -> bool:
        return self.illegal_player is not None or self.won_by is not None or not self.legal()

    def play(self, reply: str) -> bool:
        """Apply `reply` as the current player's move; False (and the game over) when illegal."""
        cell = read_move(reply)
        if cell is None or cell not in self.legal():
            self.illegal_player = self.current
            return False
        self.board[cell] = SYMBOLS[self.current]
        self.moves += 1
        self.current = 1 - self.current
        return True

    def outcome(self, player: int) -> float:
        """+1 won, -1 lost, 0 drawn or unfinished (the illegal-move penalty is the env's)."""
        if self.won_by is None:
            return 0.0
        return 1.0 if self.won_by == player else -1.0

    def observation(self, player: int) -> str:
        moves = ", ".join(f"'[{i}]'" for i in self.legal())
        return (
            f"You are playing tic-tac-toe as '{SYMBOLS[player]}' (player {player}); player 0 "
            "moves first. Win by taking three cells in a row, column or diagonal. Reply with "
            "your move as [N] for an empty cell N; any other reply loses the game.\n"
            "Current Board:\n" + board_text(self.board) + f"\nAvailable Moves: {moves}"
        )


def board_from_observation(text: str) -> tuple[list[str], str]:
    """The board (' ' for empty) and the player's symbol, read back from `observation` or from
    textarena's (whose running log holds every board so far: the last is the current one)."""
    symbol = "O" if "as 'O'" in text or "you will be 'O'" in text else "X"
    section = text.rsplit("Current Board:\n", 1)[1].split("\nAvailable Moves:")[0]
    rows = [row for row in section.splitlines() if "|" in row]
    cells = [c.strip() for row in rows for c in row.split("|")]
    return [c if c in SYMBOLS else " " for c in cells], symbol


@dataclass
class RandomOpponent:
    """A uniformly random legal move (seeded)."""

    seed: int = 0
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    async def __call__(self, messages: list[Message]) -> Message:
        board, _ = board_from_observation(get_text_content(messages[-1]))
        cell = self.rng.choice([i for i, c in enumerate(board) if c == " "])
        return {"role": "assistant", "content": f"[{cell}]"}


def _minimax(board: list[str], me: str, other: str, my_turn: bool) -> int:
    won = winner(board)
    if won is not None:
        return 1 if won == me else -1
    empty = [i for i, c in enumerate(board) if c == " "]
    if not empty:
        return 0
    scores = []
    for i in empty:
        board[i] = me if my_turn else other
        scores.append(_minimax(board, me, other, not my_turn))
        board[i] = " "
    return max(scores) if my_turn else min(scores)


class MinimaxOpponent:
    """Perfect play: the first cell with the best minimax value (never loses)."""

    async def __call__(self, messages: list[Message]) -> Message:
        board, me = board_from_observation(get_text_content(messages[-1]))
        other = "X" if me == "O" else "O"
        best, best_cell = -2, -1
        for i in [i for i, c in enumerate(board) if c == " "]:
            board[i] = me
            score = _minimax(board, me, other, my_turn=False)
            board[i] = " "
            if score > best:
                best, best_cell = score, i
        return {"role": "assistant", "content": f"[{best_cell}]"}
