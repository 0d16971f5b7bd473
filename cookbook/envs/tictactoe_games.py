"""Where text_arena's tic-tac-toe comes from: `textarena` (TicTacToe-v0, the cookbook's game) or
`builtin` (cookbook/envs/tictactoe.py, no package needed), one table over the one interface the
coordinator, the env and `kitchen play` use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

from cookbook.envs.tictactoe import TicTacToe
from cookbook.envs.tictactoe_textarena import TextArenaTicTacToe, require_textarena
from kitchen.engine.errors import ConfigError

GameName = Literal["textarena", "builtin"]


class TwoPlayerGame(Protocol):
    """A game in progress; `play` applies the current player's reply and says if it was legal
    (an illegal one ends the game with that player as `illegal_player`)."""

    illegal_player: int | None
    moves: int

    @property
    def current(self) -> int: ...
    @property
    def board(self) -> list[str]: ...
    @property
    def won_by(self) -> int | None: ...
    @property
    def done(self) -> bool: ...
    def legal(self) -> list[int]: ...
    def play(self, reply: str) -> bool: ...
    def outcome(self, player: int) -> float: ...
    def observation(self, player: int) -> str: ...


GAMES: dict[str, Callable[[], TwoPlayerGame]] = {
    "textarena": TextArenaTicTacToe,
    "builtin": TicTacToe,
}


def new_game_factory(name: str) -> Callable[[], TwoPlayerGame]:
    """What makes a fresh game of `name`; a ConfigError on one line if textarena is asked for and
    missing, or the name is unknown."""
    if name not in GAMES:
        raise ConfigError(f"game={name!r}: expected one of {', '.join(GAMES)}")
    if name == "textarena":
        require_textarena()
    return GAMES[name]
