"""Async off-policy RL: rollouts keep running while the learner trains.

A bounded pool of rollout tasks samples with whatever sampler is current when each group starts,
so a group may come from weights up to a few steps old. Each group is tagged with the policy
version it was sampled at; a step trains the oldest groups first and drops (and re-runs with the
current weights) any group more than `max_steps_off_policy` versions behind, so every trained
sample is within that bound. At most groups_per_batch * (max_steps_off_policy + 1) groups are
started but not yet trained (tinker-cookbook's rollout slots); a slot is freed when the new
weights are published, so rollouts started on freed slots use them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kitchen.engine.errors import DataError
from kitchen.engine.stage import Context, Metrics
from kitchen.workflows.reinforcement.agents import (
    AGENTS_PORT,
    AgentRollouts,
    Seam,
    rollout_group,
    settle,
)
from kitchen.workflows.reinforcement.rollout import RolloutSampling
from train_core.agents.rollouts import GroupOutcome
from train_core.completers import EnvPolicies, TokenCompleter

PolicyFor = Callable[[Any, tuple[int, ...]], TokenCompleter | EnvPolicies]
"""(sampler, seed key of the group) -> the policy that group samples with."""


@dataclass
class TaggedGroup:
    """A finished group, its builder, and the policy version that sampled it."""

    builder: Any
    outcome: GroupOutcome
    version: int
    where: tuple[int, int]  # (batch index, group index): the group's seed key

    @property
    def group(self) -> Any:
        return self.outcome.group


class AsyncRolloutPool:
    """Rollout tasks over the dataset's batches from `start_batch` on, bounded by slots."""

    def __init__(
        self,
        dataset: Any,
        end_batch: int,
        groups_per_batch: int,
        max_steps_off_policy: int,
        policy_for: PolicyFor,
        sampler: Any,
        version: int,
        agents: tuple[Any, AgentRollouts] | None = None,
    ) -> None:
        """`agents`: (the gateway, how agent groups roll out), where the dataset has agents."""
        self.dataset, self.end_batch = dataset, end_batch
        self.agents = agents
        self.max_steps_off_policy = max_steps_off_policy
        self.capacity = groups_per_batch * (max_steps_off_policy + 1)
        self.policy_for = policy_for
        self.sampler, self.version = sampler, version
        self.dropped = 0
        self._slots = asyncio.Semaphore(self.capacity)
        # Finished groups, rollout errors, and None: "the feeder is done", to wake a waiting take().
        self._finished: asyncio.Queue[TaggedGroup | BaseException | None] = asyncio.Queue()
        self._buffer: list[TaggedGroup] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._expected = 0  # groups accepted for rollout and not yet taken
        self._started = self._feeding = False
        self._unreleased = 0  # slots of groups taken but not yet trained on
        self._dropped_outcomes: list[TaggedGroup] = []  # agent groups left with too few rollouts

    def start(self, start_batch: int) -> None:
        if not self._started:
            self._started = self._feeding = True
            self._spawn(self._feed(start_batch))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _feed(self, start_batch: int) -> None:
        try:
            for i_batch in range(start_batch, self.end_batch):
                for i_group, builder in enumerate(self.dataset.get_batch(i_batch)):
                    self._expected += 1
                    await self._launch(builder, (i_batch, i_group))
        finally:
            self._feeding = False
            self._finished.put_nowait(None)

    async def _launch(self, builder: Any, where: tuple[int, int]) -> None:
        """Roll out the group at (batch, group index) `where`, seeded by that place."""
        await self._slots.acquire()
        # Read the sampler and its version together, after the slot: the newest weights.
        policy = self.policy_for(self.sampler, where)
        self._spawn(self._rollout(builder, where, policy, self.version))

    async def _rollout(
        self,
        builder: Any,
        where: tuple[int, int],
        policy: TokenCompleter | EnvPolicies,
        version: int,
    ) -> None:
        seam = Seam()
        if self.agents is not None:
            gateway, agents = self.agents
            seam = Seam.over(gateway, agents, str(where[0]))
        try:
            outcome = await rollout_group(builder, policy, where[1], seam)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._finished.put_nowait(e)
            return
        self._finished.put_nowait(TaggedGroup(builder, outcome, version, where))

    async def take(self, n: int, step: int) -> list[TaggedGroup]:
        """`n` groups no more than max_steps_off_policy versions behind `step`, oldest first
        (fewer only when the dataset runs out). Older ones are dropped and rolled out again."""
        while True:
            while not self._finished.empty():
                self._receive(self._finished.get_nowait(), step)
            self._buffer.sort(key=lambda g: g.version)
            if len(self._buffer) >= n or (
                self._expected == len(self._buffer) and not self._feeding
            ):
                batch, self._buffer = self._buffer[:n], self._buffer[n:]
                self._expected -= len(batch)
                self._unreleased += len(batch)
                return batch
            self._receive(await self._finished.get(), step)

    def take_dropped(self) -> list[TaggedGroup]:
        """The agent groups dropped whole since the last call (they count in a step's failures)."""
        dropped, self._dropped_outcomes = self._dropped_outcomes, []
        return dropped

    def _receive(self, item: TaggedGroup | BaseException | None, step: int) -> None:
        if item is None:
            return
        if isinstance(item, BaseException):
            raise item
        if item.group is None:  # nothing to train on: its slot goes to the next group
            self._expected -= 1
            self._slots.release()
            self._dropped_outcomes.append(item)
            return
        if step - item.version > self.max_steps_off_policy:
            self.dropped += 1
            self._slots.release()
            self._spawn(self._launch(item.builder, item.where))
            return
        self._buffer.append(item)

    def publish(self, sampler: Any, version: int) -> None:
        """New weights for rollouts started from now on; frees the slots of the groups taken."""
        self.sampler, self.version = sampler, version
        for _ in range(self._unreleased):
            self._slots.release()
        self._unreleased = 0

    async def close(self) -> None:
        """Cancel every rollout still running and wait for them (env cleanup included)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # A cancelled task may have spawned a relaunch before it noticed; catch those too.
        if self._tasks:
            await self.close()


@dataclass(frozen=True, kw_only=True)
class StartRolloutPool:
    """The pool of async rollouts and its first sampler (the current weights)."""

    groups_per_batch: int
    max_steps_off_policy: int
    sampling: RolloutSampling
    # repr=False: the plan of a classic env run (no agents) reads as it did before the seam
    agents: AgentRollouts | None = field(default=None, repr=False)
    name: str = "start_rollout_pool"
    reads: frozenset[str] = frozenset({"training_client", "dataset", "n_batches", "rollout_pool"})
    writes: frozenset[str] = frozenset({"rollout_pool", "sampling_client", "policy_version"})

    @property
    def ports(self) -> frozenset[str]:
        return frozenset({"backend", *([AGENTS_PORT] if self.agents is not None else [])})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        state = ctx.state
        sampler = state.training_client.save_weights_and_get_sampling_client()
        state.sampling_client, state.policy_version = sampler, state.step
        state.rollout_pool = AsyncRolloutPool(
            state.dataset,
            state.n_batches,
            self.groups_per_batch,
            self.max_steps_off_policy,
            lambda sampler, where: self.sampling.policy(sampler, *where),
            sampler,
            state.step,
            (ctx.port(AGENTS_PORT), self.agents) if self.agents is not None else None,
        )
        return None


@dataclass(frozen=True, kw_only=True)
class CollectGroups:
    """This step's groups from the pool (started at this batch on the first step)."""

    groups_per_batch: int
    # repr=False: the plan of a classic env run (no agents) reads as it did before the seam
    agents: AgentRollouts | None = field(default=None, repr=False)
    name: str = "collect_groups"
    phase: ClassVar[str] = "sampling"  # the learner's wait for rollouts that run beside it
    reads: frozenset[str] = frozenset({"rollout_pool", "batch_idx"})
    writes: frozenset[str] = frozenset(
        {"env_group_builders", "trajectory_groups", "group_versions"}
    )

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        state, pool = ctx.state, ctx.state.rollout_pool
        pool.start(state.batch_idx)
        t0, dropped = time.perf_counter(), pool.dropped
        batch = await pool.take(self.groups_per_batch, state.step)
        if not batch:
            raise DataError(f"async RL: the dataset ran out of groups before step {state.step}")
        finished = [*batch, *pool.take_dropped()]
        _, _, agent_metrics = settle(
            [g.builder for g in finished], [g.outcome for g in finished], self.agents
        )
        state.env_group_builders = [g.builder for g in batch]
        state.trajectory_groups = [g.group for g in batch]
        state.group_versions = [g.version for g in batch]
        return {
            "time/wait_for_groups": time.perf_counter() - t0,
            "async/dropped_groups": pool.dropped - dropped,
            **agent_metrics,
        }


@dataclass(frozen=True, kw_only=True)
class PublishSampler:
    """Weights after this step's update to the pool (version step + 1) and to evaluation."""

    name: str = "publish_sampler"
    reads: frozenset[str] = frozenset({"training_client", "rollout_pool"})
    writes: frozenset[str] = frozenset({"sampling_client", "policy_version"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        state = ctx.state
        sampler = state.training_client.save_weights_and_get_sampling_client()
        state.sampling_client, state.policy_version = sampler, state.step + 1
        state.rollout_pool.publish(sampler, state.step + 1)
        return None


@dataclass(frozen=True, kw_only=True)
class StopRolloutPool:
    """Cancel and await every rollout still in flight (runs in finally_, also after errors)."""

    name: str = "stop_rollout_pool"
    reads: frozenset[str] = frozenset({"rollout_pool"})
    writes: frozenset[str] = frozenset()

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        if ctx.state.rollout_pool is not None:
            await ctx.state.rollout_pool.close()
        return None
