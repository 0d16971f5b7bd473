"""Two-player games for RL, as tinker-cookbook 0.6.1's multiplayer_rl/text_arena: in self-play
the two envs of a group are the two players of one game, and a coordinator makes them alternate
(a player's observation waits until the other has moved); both trajectories train. Against a
fixed opponent (tests: random, minimax, the frozen base policy) each env plays its own game and
the opponent moves inside it. An illegal move ends the game; its player gets ILLEGAL_MOVE_REWARD
(-2, the cookbook's), the other 0. Otherwise the outcome is the reward: +1, -1, or 0 for a draw.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tinker import types

from cookbook.envs.tictactoe import TicTacToe
from cookbook.envs.tictactoe_games import GameName, TwoPlayerGame, new_game_factory
from train_core.renderers.content import get_text_content
from train_core.renderers.types import Message
from train_core.rl.types import (
    PARSE_ERROR_MASKED_METRIC_KEY,
    Action,
    ActionExtra,
    Env,
    EnvGroupBuilder,
    Observation,
    RLDataset,
    RLEnvContext,
    StepResult,
)

ILLEGAL_MOVE_REWARD = -2.0
Opponent = Callable[[list[Message]], Awaitable[Message]]


class NotYourTurn(RuntimeError):
    """A player moved out of turn: the coordinator's alternation was broken."""


class TwoPlayerCoordinator:
    """One shared game; `wait_turn(p)` returns when it is p's turn or the game is over."""

    def __init__(self, game: TwoPlayerGame | None = None) -> None:
        self.game: TwoPlayerGame = game or TicTacToe()
        self.changed = asyncio.Condition()
        self.history: list[int] = []

    async def wait_turn(self, player: int) -> None:
        async with self.changed:
            await self.changed.wait_for(lambda: self.game.done or self.game.current == player)

    async def move(self, player: int, reply: str) -> bool:
        async with self.changed:
            if self.game.done or self.game.current != player:
                raise NotYourTurn(
                    f"player {player} moved, but it is player {self.game.current}'s turn"
                )
            self.history.append(player)
            legal = self.game.play(reply)
            self.changed.notify_all()
            return legal


async def opponent_moves(opponent: Opponent, coordinator: TwoPlayerCoordinator, player: int) -> str:
    """`opponent` makes `player`'s move: it sees the player's observation as one user message,
    and its reply's text is played (no legal `[N]` in it ends the game). Returns the reply."""
    seen: Message = {"role": "user", "content": coordinator.game.observation(player)}
    reply = get_text_content(await opponent([seen]))
    await coordinator.move(player, reply)
    return reply


def player_reward(game: TwoPlayerGame, player: int) -> float:
    """`player`'s reward for a finished game: ILLEGAL_MOVE_REWARD for an illegal move (the other
    player 0), else the outcome."""
    if game.illegal_player is not None:
        return ILLEGAL_MOVE_REWARD if game.illegal_player == player else 0.0
    return game.outcome(player)


@dataclass
class TwoPlayerEnv(Env):
    """Player `player` of `coordinator`'s game; with an `opponent` it also makes the other
    player's moves (no self-play)."""

    player: int
    coordinator: TwoPlayerCoordinator
    renderer: Any
    opponent: Opponent | None = None
    moves: int = 0

    @property
    def game(self) -> TwoPlayerGame:
        return self.coordinator.game

    def _observation(self) -> Observation:
        message: Message = {"role": "user", "content": self.game.observation(self.player)}
        return self.renderer.build_generation_prompt([message])

    async def _others_turn(self) -> None:
        if self.game.done:
            return
        if self.opponent is None:
            await self.coordinator.wait_turn(self.player)
            return
        await opponent_moves(self.opponent, self.coordinator, 1 - self.player)

    async def initial_observation(self) -> tuple[Observation, Any]:
        if self.player != 0:
            await self._others_turn()
        return self._observation(), self.renderer.get_stop_sequences()

    def reward(self) -> float:
        return player_reward(self.game, self.player)

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        stop = self.renderer.get_stop_sequences()
        if self.game.done:
            # The other player's first move ended the game (illegal) before this one moved: the
            # reply it sampled is no move, and trained at reward 0 it would get the group's
            # positive advantage (tinker-cookbook trains it so). Masked, it trains nothing.
            masked = {PARSE_ERROR_MASKED_METRIC_KEY: 1.0}
            return StepResult(0.0, True, types.ModelInput.empty(), stop, masked)
        message, _ = self.renderer.parse_response(action)
        self.moves += 1
        legal = await self.coordinator.move(self.player, get_text_content(message))
        await self._others_turn()
        done = self.game.done
        metrics: dict[str, float | int] = {"illegal": float(not legal)}
        if done:
            outcome = self.game.outcome(self.player)
            metrics |= {"won": float(outcome > 0), "lost": float(outcome < 0),
                        "draw": float(self.game.won_by is None and self.game.illegal_player is None),
                        "moves": float(self.moves)}  # fmt: skip
        next_ob = types.ModelInput.empty() if done else self._observation()
        return StepResult(self.reward() if done else 0.0, done, next_ob, stop, metrics)


@dataclass(frozen=True)
class TwoPlayerGroupBuilder(EnvGroupBuilder):
    """Self-play (`opponent` None): the two players of one game. Otherwise two games against
    the opponent, the policy as player 0 in one and player 1 in the other. `new_game` is where
    the games come from (cookbook/envs/tictactoe_games.py)."""

    renderer: Any
    opponent: Opponent | None = None
    tag: str = "tictactoe"
    new_game: Callable[[], TwoPlayerGame] = TicTacToe

    async def make_envs(self) -> Sequence[Env]:
        if self.opponent is None:
            shared = TwoPlayerCoordinator(self.new_game())
            return [TwoPlayerEnv(p, shared, self.renderer) for p in (0, 1)]
        return [TwoPlayerEnv(p, TwoPlayerCoordinator(self.new_game()), self.renderer, self.opponent)
                for p in (0, 1)]  # fmt: skip

    def logging_tags(self) -> list[str]:
        return [self.tag]


@dataclass(frozen=True)
class GamesDataset(RLDataset):
    """`num_games` games, `games_per_batch` per batch."""

    builder: TwoPlayerGroupBuilder
    num_games: int
    games_per_batch: int

    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]:
        n = min(self.games_per_batch, self.num_games - index * self.games_per_batch)
        return [self.builder] * max(n, 0)

    def __len__(self) -> int:
        return self.num_games // self.games_per_batch


@dataclass(frozen=True)
class TextArenaEnvs:
    """RLDatasetFactory: self-play training games of `game` (a GAMES name), and test games
    against `open_opponent(backend, policy_renderer)` (none when `test_games` is 0)."""

    games_per_batch: int
    num_games: int
    test_games: int = 0
    open_opponent: Callable[[Any, Any], Opponent] | None = field(default=None, repr=False)
    game: GameName = "builtin"

    def __call__(
        self, ctx: RLEnvContext, backend: Any = None
    ) -> tuple[GamesDataset, GamesDataset | None]:
        new_game = new_game_factory(self.game)
        selfplay = TwoPlayerGroupBuilder(ctx.renderer, new_game=new_game)
        train = GamesDataset(selfplay, self.num_games, self.games_per_batch)
        if not self.test_games or self.open_opponent is None:
            return train, None
        versus = TwoPlayerGroupBuilder(
            ctx.renderer, self.open_opponent(backend, ctx.renderer), "versus", new_game
        )
        return train, GamesDataset(versus, self.test_games, self.test_games)
