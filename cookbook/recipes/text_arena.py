"""text_arena: two-player self-play RL on tic-tac-toe, as tinker-cookbook's
multiplayer_rl/text_arena. Each training game is one group: the policy plays both sides, the two
envs alternate through a coordinator, and both players' trajectories train (win +1, loss -1,
draw 0, an illegal move -2 and the game over). Test games are against `--test-opponent`:
random, minimax (perfect play) or base_model (the frozen base policy).

`--game textarena` (the default, the cookbook's) plays textarena's TicTacToe-v0, its observation
and move parsing; `--game builtin` plays cookbook/envs/tictactoe.py, which needs no package.
Locally: SmolLM2-135M-Instruct. `--preset cookbook`: Qwen3.5-4B through Tinker, 256 games per
step (the cookbook's 512 players), LR 3e-5, 64 tokens, tested against the base model.
"""

from __future__ import annotations

from functools import partial
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from cookbook.envs.text_arena import Opponent, TextArenaEnvs
from cookbook.envs.tictactoe import MinimaxOpponent, RandomOpponent
from cookbook.envs.tictactoe_games import GameName
from cookbook.recipes import SMOLLM2_RL
from cookbook.recipes.env_rl import EnvRL
from kitchen.workflows.reinforcement import RLConfig
from train_core.completers import TinkerMessageCompleter
from train_core.rl.types import RLDatasetFactory

OpponentName = Literal["random", "minimax", "base_model"]


class TextArenaConfig(RLConfig):
    defaults: ClassVar[dict[str, Any]] = {
        **SMOLLM2_RL,
        "groups_per_batch": 8,
        "group_size": 2,
        "max_tokens": 8,
    }
    num_games: int = Field(1024, ge=1, description="Self-play training games (2 players each)")
    num_test_games: int = Field(
        0, ge=0, description="Test games against --test-opponent every eval_every steps (0 = none)"
    )
    game: GameName = Field(
        "textarena",
        description="textarena (its TicTacToe-v0, the cookbook's; `make install` installs it) "
        "| builtin (cookbook/envs/tictactoe.py, no package)",
    )
    test_opponent: OpponentName = Field(
        "minimax",
        description="random | minimax (never loses) | base_model (the frozen base policy)",
    )

    @model_validator(mode="after")
    def _two_players(self) -> TextArenaConfig:
        if self.group_size != 2:
            raise ValueError(f"group_size is the 2 players of one game; got {self.group_size}")
        return self


def open_opponent(cfg: TextArenaConfig, backend: Any, renderer: Any) -> Opponent:
    if cfg.test_opponent == "random":
        return RandomOpponent(cfg.seed)
    if cfg.test_opponent == "minimax":
        return MinimaxOpponent()
    client = backend.create_sampling_client(base_model=cfg.model_name)
    return TinkerMessageCompleter(client, renderer, cfg.max_tokens, temperature=1.0)


class TextArena(EnvRL[TextArenaConfig]):
    """Two-player self-play RL on tic-tac-toe (tests vs random, minimax or the base model)."""

    name = "text_arena"
    samples_on_backend = True

    def envs(self, cfg: TextArenaConfig) -> RLDatasetFactory:
        return TextArenaEnvs(cfg.groups_per_batch, cfg.num_games, cfg.num_test_games,
                             partial(open_opponent, cfg), cfg.game)  # fmt: skip
