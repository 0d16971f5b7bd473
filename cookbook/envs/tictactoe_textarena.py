"""Tic-tac-toe played through the `textarena` package's TicTacToe-v0, the game tinker-cookbook
0.6.1's text_arena trains on, behind the interface of the built-in game (cookbook/envs/
tictactoe.py) so the coordinator, the env and `kitchen play` use either.

What textarena decides: the observation (its LLM wrapper's running log for the player: the rules,
each move, each board, `Available Moves: '[0]', ...`), the move (the first `[N]` in the reply; a
reply with no bracket at all is wrapped in one, so a bare `4` is a move), wins and draws (+1/-1, 0).
What it does not: textarena forgives one invalid move and asks again; the cookbook ends the game
there (the player still to move after its move), and so does this class, the penalty being the
env's (ILLEGAL_MOVE_REWARD).
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

from kitchen.engine.errors import ConfigError

GAME_ID = "TicTacToe-v0"


def require_textarena() -> None:
    """A ConfigError on one line when the package is missing (checked without importing it)."""
    if find_spec("textarena") is None:
        raise ConfigError(
            "game=textarena: the textarena package is not installed (the Makefile's install "
            "line pins it: make install); or pass --game builtin"
        )


class TextArenaTicTacToe:
    """One TicTacToe-v0 game of textarena, reset for two players."""

    def __init__(self) -> None:
        require_textarena()
        import textarena as ta

        self.env: Any = ta.make(GAME_ID)
        self.env.reset(num_players=2)
        self.illegal_player: int | None = None
        self.moves = 0

    @property
    def _state(self) -> Any:
        return self.env.state

    @property
    def current(self) -> int:
        return int(self._state.current_player_id)

    @property
    def board(self) -> list[str]:
        """The nine cells, row by row, ' ' for empty (the built-in game's layout)."""
        return [cell or " " for row in self._state.game_state["board"] for cell in row]

    def legal(self) -> list[int]:
        return [i for i, c in enumerate(self.board) if c == " "]

    @property
    def won_by(self) -> int | None:
        rewards = self._state.rewards if self._state.done else None
        winners = [p for p, r in (rewards or {}).items() if r > 0]
        return winners[0] if winners else None

    @property
    def done(self) -> bool:
        return bool(self._state.done) or self.illegal_player is not None

    def play(self, reply: str) -> bool:
        """`reply` as the current player's move, through textarena's step; False (and the game
        over) when textarena keeps the turn with the same player, i.e. refused the move."""
        before = self.current
        finished, _ = self.env.step(reply)
        if finished:
            self.env.close()
        elif self.current == before:
            self.illegal_player = before
            return False
        self.moves += 1
        return True

    def outcome(self, player: int) -> float:
        """textarena's reward for a finished game: +1, -1, or 0 drawn (0 too when unfinished)."""
        rewards = self._state.rewards if self._state.done else None
        return float((rewards or {}).get(player, 0.0))

    def observation(self, player: int) -> str:
        """textarena's observation for `player`: the one to move, or either once the game is
        over (the other's illegal first move leaves player 1 an observation to be shown)."""
        if not self.done and player != self.current:
            raise RuntimeError(f"textarena shows player {self.current}'s observation, not player {player}'s")  # fmt: skip
        # textarena hands out only the current player's; over, the turn is no one's to keep
        keep = self._state.current_player_id
        self._state.current_player_id = player
        try:
            shown, text = self.env.get_observation()
        finally:
            self._state.current_player_id = keep
        return str(text)
