"""Rollout stages: sample every env group of a batch concurrently, write transcripts, evaluate."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from kitchen.engine.stage import Context, Metrics
from kitchen.workflows.common.images import readable_input
from kitchen.workflows.common.seeding import EVALUATION_STREAM, ROLLOUT_STREAM, SeededSampler
from kitchen.workflows.reinforcement.agents import (
    AGENTS_PORT,
    AgentRollouts,
    Seam,
    rollout_group,
    settle,
)
from train_core.agents.rollouts import GroupOutcome
from train_core.completers import (
    EnvPolicies,
    GroupedTokenCompleter,
    TinkerTokenCompleter,
    TokenCompleter,
)

GroupPolicy = Callable[[int], TokenCompleter | EnvPolicies]
"""group index -> the policy that group samples with (its own seed stream)."""


@dataclass(frozen=True)
class RolloutSampling:
    """How training rollouts sample, the same in every RL mode: `max_tokens` and `temperature` per
    turn; with `coalesce`, a group's identical prompts in one call; seeds drawn from `seed`'s
    rollout stream, keyed by where the group stands, so a batch's samples are a function of the
    weights and the key alone."""

    max_tokens: int
    temperature: float = 1.0
    coalesce: bool = True
    seed: int = 0

    def policy(
        self, sampling_client: Any, *where: int, stream: int = ROLLOUT_STREAM
    ) -> TokenCompleter | EnvPolicies:
        """The policy of the group at `where` (e.g. batch index, group index): unseeded requests
        draw their seeds from the stream keyed by (seed, stream, *where) (SeededSampler), or,
        not coalesced, env j's from (seed, stream, *where, j): an env's seeds must not depend on
        which env asks first (code envs render in threads, so that order is timing-dependent)."""
        if self.coalesce:
            sampler = SeededSampler(sampling_client, (self.seed, stream, *where))
            return GroupedTokenCompleter(sampler, self.max_tokens, self.temperature)
        return EnvPolicies(
            lambda j: TinkerTokenCompleter(
                SeededSampler(sampling_client, (self.seed, stream, *where, j)),
                max_tokens=self.max_tokens,
                temperature=self.temperature,
            )
        )

    def group_policies(
        self, sampling_client: Any, index: int, stream: int = ROLLOUT_STREAM
    ) -> GroupPolicy:
        """Group i of batch (or evaluation) `index` samples with seeds keyed by (index, i):
        independent of which group asks first."""
        return lambda i: self.policy(sampling_client, index, i, stream=stream)


async def _indexed_group_rollout(
    i: int, builder: Any, policy: TokenCompleter | EnvPolicies, seam: Seam
) -> tuple[int, GroupOutcome]:
    return i, await rollout_group(builder, policy, i, seam)


async def batch_rollouts(
    builders_P: list[Any], policy_for: GroupPolicy, seam: Seam | None = None
) -> list[GroupOutcome]:
    """Every group concurrently, each with its own policy (agent groups through `seam`'s
    gateway); outcomes in builder order."""
    async with group_rollout_tasks(builders_P, policy_for, seam) as tasks:
        return [outcome for _, outcome in await asyncio.gather(*tasks)]


@contextlib.asynccontextmanager
async def group_rollout_tasks(
    builders_P: list[Any], policy_for: GroupPolicy, seam: Seam | None = None
) -> AsyncIterator[list[asyncio.Task[tuple[int, GroupOutcome]]]]:
    """One task per group, each resolving to (group index, GroupOutcome). On exit every task
    still running is cancelled and awaited (its env cleanup runs), so nothing outlives the block."""
    tasks = [
        asyncio.ensure_future(_indexed_group_rollout(i, b, policy_for(i), seam or Seam()))
        for i, b in enumerate(builders_P)
    ]
    try:
        yield tasks
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@dataclass(frozen=True, kw_only=True)
class DoRollouts:
    """Roll out every group of this batch with the current sampler: one asyncio task per group,
    the envs of a group concurrently (train_core.rl.do_batch_rollouts). With `agents`, agent
    groups run through the run's gateway (agents.py), their dropped rollouts counted."""

    sampling: RolloutSampling
    # repr=False: the plan of a classic env run (no agents) reads as it did before the seam
    agents: AgentRollouts | None = field(default=None, repr=False)
    name: str = "do_rollouts"
    phase: ClassVar[str] = "sampling"
    reads: frozenset[str] = frozenset({"sampling_client", "dataset", "batch_idx", "policy_version"})
    writes: frozenset[str] = frozenset(
        {"env_group_builders", "trajectory_groups", "group_versions"}
    )

    @property
    def ports(self) -> frozenset[str]:
        return frozenset({AGENTS_PORT}) if self.agents is not None else frozenset()

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        state = ctx.state
        builders_P = list(state.dataset.get_batch(state.batch_idx))
        policy_for = self.sampling.group_policies(state.sampling_client, state.batch_idx)
        seam = Seam.of(ctx, self.agents, str(state.batch_idx))
        t0 = time.perf_counter()
        outcomes_P = await batch_rollouts(builders_P, policy_for, seam)
        builders_P, groups_P, metrics = settle(builders_P, outcomes_P, self.agents)
        state.env_group_builders, state.trajectory_groups = builders_P, groups_P
        state.group_versions = [state.policy_version] * len(groups_P)
        return {"time/rollouts": time.perf_counter() - t0, **metrics}


def token_pieces(tokenizer: Any, tokens: list[int]) -> list[str]:
    """The sampled tokens as text pieces that join to the decoded response; a token that ends
    inside a multi-byte character is joined to the next ones until the character is whole."""
    pieces, pending = [], []
    for token in tokens:
        pending.append(token)
        text = str(tokenizer.decode(pending))
        if not text.endswith("\ufffd"):
            pieces.append(text)
            pending = []
    if pending:
        pieces.append(str(tokenizer.decode(pending)))
    return pieces


def transcript_records(
    iteration: int,
    groups_P: list[Any],
    builders_P: list[Any],
    versions_P: list[int],
    tokenizer: Any,
    advantages_P: list[Any] | None = None,
    run_dir: Path | None = None,
) -> list[dict[str, Any]]:
    """One JSON record per group: its tags, policy version and each trajectory's turns (prompt
    text, response text and its sampled tokens as text pieces, reward, and with `advantages_P`
    (per group, per trajectory, one per turn) the advantage every token of the turn trains with)
    and total reward. A prompt's images are saved in `run_dir` and listed by path in the turn's
    "images" (common/images.py)."""
    records = []
    for i, (group, builder, version) in enumerate(
        zip(groups_P, builders_P, versions_P, strict=True)
    ):
        trajectories = []
        for j, (traj, total) in enumerate(
            zip(group.trajectories_G, group.get_total_rewards(), strict=True)
        ):
            turns = [_turn(tokenizer, t, run_dir) for t in traj.transitions]
            if advantages_P is not None:
                for turn, advantage in zip(turns, advantages_P[i][j], strict=True):
                    turn["advantage"] = float(advantage)
            trajectories.append({"reward": total, "turns": turns})
        records.append(
            {
                "iteration": iteration,
                "group": i,
                "policy_version": version,
                "tags": list(builder.logging_tags()),
                "trajectories": trajectories,
            }
        )
    return records


def _turn(tokenizer: Any, transition: Any, run_dir: Path | None) -> dict[str, Any]:
    prompt, images = readable_input(tokenizer, transition.ob, run_dir)
    tokens = list(transition.ac.tokens)
    turn = {
        "prompt": prompt,
        "response": str(tokenizer.decode(tokens)),
        "tokens": token_pieces(tokenizer, tokens),
        "reward": transition.reward,
        "metrics": dict(transition.metrics),
    }
    return {**turn, "images": images} if images else turn


@dataclass(frozen=True, kw_only=True)
class WriteRollouts:
    """Transcripts of this step's groups to `<log_dir>/rollouts/iter_XXXXXX.jsonl`, each turn with
    the advantage it trains with, as the step computed them (ComputeAdvantages, or the streaming
    step per minibatch); a KL penalty added later per token is not in it."""

    name: str = "write_rollouts"
    reads: frozenset[str] = frozenset(
        {"trajectory_groups", "env_group_builders", "group_versions", "advantages", "tokenizer"}
    )
    writes: frozenset[str] = frozenset()

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        if ctx.log_dir is None:
            return None
        state = ctx.state
        records = transcript_records(
            state.step,
            state.trajectory_groups,
            state.env_group_builders,
            state.group_versions,
            state.tokenizer,
            state.advantages,
            Path(ctx.log_dir),
        )
        folder = Path(ctx.log_dir) / "rollouts"
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / f"iter_{state.step:06d}.jsonl").open("w") as f:
            for record in records:
                f.write(json.dumps(record) + "\n")
        return None


@dataclass(frozen=True, kw_only=True)
class EvaluateRL:
    """Mean test-set reward and env metrics (`test/env/all/...`) of the current sampler, at
    `temperature` (0 = greedy). `report=True` (end of run): its own record at the current step,
    and the run's `eval_results` (what the model registry records)."""

    max_tokens: int
    temperature: float = 0.0
    seed: int = 0
    prefix: str = "test"
    report: bool = False
    # repr=False: the plan of a classic env run (no agents) reads as it did before the seam
    agents: AgentRollouts | None = field(default=None, repr=False)
    name: str = "evaluate_rl"
    phase: ClassVar[str] = "evaluation"

    @property
    def ports(self) -> frozenset[str]:
        return frozenset({AGENTS_PORT}) if self.agents is not None else frozenset()

    @property
    def reads(self) -> frozenset[str]:
        return frozenset({"sampling_client", "test_dataset"} | self.writes)

    @property
    def writes(self) -> frozenset[str]:
        return frozenset({"eval_results"}) if self.report else frozenset()

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.rl import compute_trajectory_metrics

        dataset = ctx.state.test_dataset
        if dataset is None:
            return None
        builders = [b for i in range(len(dataset)) for b in dataset.get_batch(i)]
        sampling = RolloutSampling(self.max_tokens, self.temperature, True, self.seed)
        policy_for = sampling.group_policies(
            ctx.state.sampling_client, ctx.state.step, EVALUATION_STREAM
        )
        seam = Seam.of(ctx, self.agents, f"{self.prefix}-{ctx.state.step}")
        outcomes = await batch_rollouts(builders, policy_for, seam)
        builders, groups, agent_metrics = settle(builders, outcomes, self.agents)
        metrics = {
            **compute_trajectory_metrics(groups, [b.logging_tags() for b in builders]),
            **agent_metrics,
        }
        out: Metrics = {f"{self.prefix}/{k}": v for k, v in metrics.items()}
        if not self.report:
            return out
        ctx.state.eval_results = {**ctx.state.eval_results, **out}
        return {"step": ctx.state.step, **out}
