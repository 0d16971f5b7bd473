"""Hand-made envs, policies and renderers for the RL core tests (no model, no tokenizer)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tinker import types

from train_core.completers import TokenCompleter, TokensWithLogprobs
from train_core.rl.types import (
    Env,
    EnvGroupBuilder,
    Metrics,
    StepResult,
    Trajectory,
    TrajectoryGroup,
    Transition,
)


def ob(*tokens: int) -> types.ModelInput:
    return types.ModelInput.from_ints(list(tokens))


def ac(*tokens: int, logprob: float = -0.5, sequence_id: str | None = None) -> TokensWithLogprobs:
    return TokensWithLogprobs(
        tokens=list(tokens), maybe_logprobs=[logprob] * len(tokens), sequence_id=sequence_id
    )


def transition(
    ob_tokens: Sequence[int],
    ac_tokens: Sequence[int],
    reward: float = 0.0,
    metrics: Metrics | None = None,
    logprob: float = -0.5,
    sequence_id: str | None = None,
) -> Transition:
    return Transition(
        ob=ob(*ob_tokens),
        ac=ac(*ac_tokens, logprob=logprob, sequence_id=sequence_id),
        reward=reward,
        episode_done=False,
        metrics=dict(metrics or {}),
    )


def single_turn_group(
    rewards: Sequence[float],
    metrics: Sequence[Metrics] | None = None,
    ac_len: int = 2,
    ob_len: int = 3,
) -> TrajectoryGroup:
    """One single-turn trajectory per reward (rewards come from the step; group reward 0)."""
    trajs = [
        Trajectory(
            transitions=[
                transition(
                    range(ob_len),
                    range(100, 100 + ac_len),
                    reward=r,
                    metrics=(metrics[i] if metrics else None),
                )
            ],
            final_ob=types.ModelInput.empty(),
        )
        for i, r in enumerate(rewards)
    ]
    return TrajectoryGroup(trajs, [0.0] * len(rewards), [{} for _ in rewards])


@dataclass
class FakePolicy(TokenCompleter):
    """Returns `tokens` (one logprob each); sleeps `latency` seconds per call; records calls."""

    tokens: list[int] = field(default_factory=lambda: [7, 8])
    logprob: float = -0.25
    latency: float = 0.0
    fail_after: int | None = None
    calls: list[types.ModelInput] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    async def __call__(
        self, model_input: types.ModelInput, stop: Any, *, max_tokens: int | None = None
    ) -> TokensWithLogprobs:
        self.calls.append(model_input)
        if self.fail_after is not None and len(self.calls) > self.fail_after:
            raise RuntimeError("sampler down")
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.latency:
                await asyncio.sleep(self.latency)
        finally:
            self.in_flight -= 1
        return TokensWithLogprobs(
            tokens=list(self.tokens),
            maybe_logprobs=[self.logprob] * len(self.tokens),
            stop_reason="stop",
        )


class CountdownEnv(Env):
    """`turns` turns; each observation extends the previous observation + action.

    Reward per step is `step_reward`; the last step reports metrics `correct` and stop/completed.
    """

    def __init__(self, turns: int = 1, step_reward: float = 1.0, fail_on_step: bool = False):
        self.turns = turns
        self.step_reward = step_reward
        self.fail_on_step = fail_on_step
        self.history: list[int] = [1, 2, 3]
        self.extras: list[Any] = []

    async def initial_observation(self) -> tuple[types.ModelInput, list[int]]:
        return ob(*self.history), [0]

    async def step(self, action: list[int], *, extra: Any = None) -> StepResult:
        self.extras.append(extra)
        if self.fail_on_step:
            raise RuntimeError("env exploded")
        self.turns -= 1
        self.history = [*self.history, *action, 50]
        done = self.turns == 0
        return StepResult(
            reward=self.step_reward,
            episode_done=done,
            next_observation=types.ModelInput.empty() if done else ob(*self.history),
            next_stop_condition=[0],
            metrics={"correct": 1.0, "stop/completed": 1.0} if done else {},
        )


class CountdownBuilder(EnvGroupBuilder):
    """A group of CountdownEnvs; records cleanup calls; optional group rewards."""

    def __init__(
        self,
        envs: Sequence[Env] | None = None,
        group_rewards: Sequence[float] | None = None,
        tags: Sequence[str] = ("countdown",),
    ):
        self.envs = list(envs) if envs is not None else [CountdownEnv() for _ in range(2)]
        self.group_rewards = group_rewards
        self.tags = list(tags)
        self.cleanups = 0

    async def make_envs(self) -> Sequence[Env]:
        return self.envs

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        if self.group_rewards is None:
            return [(0.0, {}) for _ in trajectory_group]
        return [(r, {"group_bonus": r}) for r in self.group_rewards]

    async def cleanup(self) -> None:
        await asyncio.sleep(0)
        self.cleanups += 1

    def logging_tags(self) -> list[str]:
        return self.tags


class Termination:
    """Stand-in for tinker-cookbook's ParseTermination."""

    def __init__(self, kind: str):
        self.kind = kind

    @property
    def is_clean(self) -> bool:
        return self.kind != "malformed"

    @property
    def is_stop_sequence(self) -> bool:
        return self.kind == "stop_sequence"


STOP = 10  # the char-renderer's stop token ("\n")
EOS = 0


class CharRenderer:
    """One token per character; a turn ends with "\\n" (stop sequence) or token 0 (EOS)."""

    def build_generation_prompt(self, messages: list[dict[str, Any]]) -> types.ModelInput:
        text = "".join(f"{m['role']}:{m['content']}\n" for m in messages) + "assistant:"
        return types.ModelInput.from_ints([ord(c) for c in text])

    def get_stop_sequences(self) -> list[int]:
        return [STOP]

    def parse_response(self, response: list[int]) -> tuple[dict[str, Any], Termination]:
        if response and response[-1] == STOP:
            kind, body = "stop_sequence", response[:-1]
        elif response and response[-1] == EOS:
            kind, body = "eos", response[:-1]
        else:
            kind, body = "malformed", response
        return {"role": "assistant", "content": "".join(chr(t) for t in body)}, Termination(kind)


def encode(text: str) -> list[int]:
    return [ord(c) for c in text]


@dataclass
class LatencySampler:
    """A sampling client that takes `latency` seconds per call and records num_samples."""

    latency: float = 0.0
    calls: list[int] = field(default_factory=list)

    def sample(self, prompt: types.ModelInput, num_samples: int, sampling_params: Any) -> Any:
        self.calls.append(num_samples)

        async def respond() -> types.SampleResponse:
            await asyncio.sleep(self.latency)
            seqs = [
                types.SampledSequence(
                    stop_reason="stop",
                    sequence_id=f"s{i}",
                    tokens_np=np.asarray([10 + i, 1], dtype=np.int32),
                    logprobs_np=np.asarray([-0.1, -0.2], dtype=np.float32),
                )
                for i in range(num_samples)
            ]
            return types.SampleResponse(sequences=seqs)

        return respond()
