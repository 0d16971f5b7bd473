"""Run episodes: one env to completion, a group of envs concurrently, a batch of groups.

Semantics follow tinker-cookbook 0.6.1's unconfigured rollout loop (no budgets, no hooks): the
policy samples, the env steps, until `episode_done`; group rewards are added afterwards, and the
builder's `cleanup()` runs whatever happens, shielded from cancellation. Envs and builders are
duck-typed so tinker-cookbook subclasses run unchanged.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from tinker import types

from train_core.completers import EnvPolicies, TokenCompleter, TokensWithLogprobs
from train_core.rl.types import (
    ActionExtra,
    Env,
    EnvGroupBuilder,
    Metrics,
    StepResult,
    Trajectory,
    TrajectoryGroup,
    Transition,
    stop_reason_from_metrics,
)

T = TypeVar("T")


async def do_single_rollout(policy: TokenCompleter, env: Env) -> Trajectory:
    """Run one episode of `env` with `policy` and return its trajectory."""
    initial = await env.initial_observation()
    if not isinstance(initial, tuple):
        # InitialObservationOverflow (ours or tinker-cookbook's): the prompt alone is over budget.
        return _overflow_trajectory(initial)
    ob, stop_condition = initial
    transitions: list[Transition] = []
    while True:
        action: TokensWithLogprobs = await policy(ob, stop_condition)
        step = await _step(env, action)
        metrics: Metrics = step.metrics if step.metrics is not None else {}
        transitions.append(
            Transition(
                ob=ob,
                ac=action,
                reward=step.reward,
                episode_done=step.episode_done,
                metrics=metrics,
                logs=step.logs if step.logs is not None else {},
            )
        )
        ob, stop_condition = step.next_observation, step.next_stop_condition
        if step.episode_done:
            return Trajectory(
                transitions=transitions, final_ob=ob, stop_reason=stop_reason_from_metrics(metrics)
            )


async def do_group_rollout(
    env_group_builder: EnvGroupBuilder, policy: TokenCompleter | EnvPolicies
) -> TrajectoryGroup:
    """Run every env of the group concurrently, then add the group rewards. `policy` is shared
    by the envs, or (EnvPolicies) made per env.

    If one rollout fails, the others are cancelled and the first error (in env order) is raised.
    `env_group_builder.cleanup()` always runs, also on error or cancellation.
    """
    try:
        envs = list(await env_group_builder.make_envs())
        if not envs:
            raise ValueError(
                f"{type(env_group_builder).__name__}.make_envs returned no envs; expected at least one"
            )
        policies = [
            policy.make(j) if isinstance(policy, EnvPolicies) else policy for j in range(len(envs))
        ]
        trajectories_G = await gather_or_cancel(
            [do_single_rollout(p, env) for p, env in zip(policies, envs, strict=True)]
        )
        rewards_and_metrics_G = await env_group_builder.compute_group_rewards(trajectories_G, envs)
        if len(rewards_and_metrics_G) != len(trajectories_G):
            raise ValueError(
                f"{type(env_group_builder).__name__}.compute_group_rewards returned "
                f"{len(rewards_and_metrics_G)} entries for {len(trajectories_G)} trajectories; "
                "expected one (reward, metrics) per trajectory"
            )
        return TrajectoryGroup(
            trajectories_G=trajectories_G,
            final_rewards_G=[float(reward) for reward, _ in rewards_and_metrics_G],
            metrics_G=[dict(metrics) for _, metrics in rewards_and_metrics_G],
        )
    finally:
        await _cleanup_shielded(env_group_builder)


async def do_batch_rollouts(
    env_group_builders_P: Sequence[EnvGroupBuilder], policy: TokenCompleter
) -> list[TrajectoryGroup]:
    """One concurrent task per group; results in builder order. Any failure cancels the rest."""
    return await gather_or_cancel(
        [do_group_rollout(builder, policy) for builder in env_group_builders_P]
    )


async def gather_or_cancel(awaitables: Sequence[Awaitable[T]]) -> list[T]:
    """Like asyncio.gather, but a failure cancels (and awaits) the siblings before raising.

    Plain gather leaves the other tasks running after the first error, which would keep
    sampling for a group that is already lost.
    """
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    if not tasks:
        return []
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        pending = [t for t in tasks if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        # Read every failure, also when this coroutine is itself cancelled: asyncio reports a
        # failed task nobody read ("Task exception was never retrieved", with its traceback) when
        # it is collected, which would bury the one error the run reports.
        errors = [t.exception() for t in tasks if not t.cancelled()]
    for error in errors:
        if error is not None:
            raise error
    return [task.result() for task in tasks]


async def _step(env: Env, action: TokensWithLogprobs) -> StepResult:
    # Envs written for older tinker-cookbook take step(action) with no `extra`.
    if _accepts_extra(env.step):
        return await env.step(action.tokens, extra=ActionExtra(stop_reason=action.stop_reason))
    step_without_extra: Any = env.step
    return await step_without_extra(action.tokens)  # type: ignore[no-any-return]


def _accepts_extra(step_fn: Any) -> bool:
    try:
        params = inspect.signature(step_fn).parameters
    except (TypeError, ValueError):
        return True
    return "extra" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _overflow_trajectory(overflow: Any) -> Trajectory:
    """One empty terminal transition carrying the overflow reward: no tokens to train on."""
    metrics: Metrics = dict(getattr(overflow, "metrics", {}) or {})
    transition = Transition(
        ob=types.ModelInput.empty(),
        ac=TokensWithLogprobs(tokens=[], maybe_logprobs=[]),
        reward=float(overflow.reward),
        episode_done=True,
        metrics=metrics,
        logs=dict(getattr(overflow, "logs", {}) or {}),
    )
    return Trajectory(
        transitions=[transition],
        final_ob=types.ModelInput.empty(),
        stop_reason=stop_reason_from_metrics(metrics),
    )


async def _cleanup_shielded(env_group_builder: EnvGroupBuilder) -> None:
    """Run cleanup to completion even if we are cancelled meanwhile, then re-raise the cancel.

    Cleanup releases sandboxes and the like; abandoning it halfway on Ctrl-C would leak them.
    """
    cleanup = getattr(env_group_builder, "cleanup", None)
    if cleanup is None:  # builders written before tinker-cookbook added cleanup()
        return
    task = asyncio.ensure_future(cleanup())
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    task.result()
