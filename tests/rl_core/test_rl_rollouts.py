import asyncio
import time
from typing import Any

import pytest
from rl_core_fakes import CountdownBuilder, CountdownEnv, FakePolicy, ob
from tinker import types

from train_core.completers import EnvPolicies
from train_core.rl.data import trajectory_to_data
from train_core.rl.rollouts import do_batch_rollouts, do_group_rollout, do_single_rollout
from train_core.rl.types import InitialObservationOverflow, StepResult


def test_single_turn_rollout_records_transition_and_stop_reason():
    env = CountdownEnv(turns=1, step_reward=0.5)
    policy = FakePolicy(tokens=[7, 8])
    traj = asyncio.run(do_single_rollout(policy, env))
    (t,) = traj.transitions
    assert t.ob.to_ints() == [1, 2, 3]
    assert t.ac.tokens == [7, 8] and t.ac.logprobs == [-0.25, -0.25]
    assert t.reward == 0.5 and t.episode_done
    assert t.metrics["correct"] == 1.0
    assert traj.stop_reason == "completed"
    assert env.extras == [{"stop_reason": "stop"}]


def test_multi_turn_rollout_feeds_each_observation_back_to_the_policy():
    policy = FakePolicy(tokens=[7])
    traj = asyncio.run(do_single_rollout(policy, CountdownEnv(turns=3)))
    assert [c.to_ints() for c in policy.calls] == [
        [1, 2, 3],
        [1, 2, 3, 7, 50],
        [1, 2, 3, 7, 50, 7, 50],
    ]
    assert [t.episode_done for t in traj.transitions] == [False, False, True]
    # Each observation extends the last, so the episode is one datum.
    assert len(trajectory_to_data(traj, 1.0)) == 1


def test_envs_of_a_group_run_concurrently():
    latency, group_size = 0.2, 8
    policy = FakePolicy(latency=latency)
    builder = CountdownBuilder([CountdownEnv() for _ in range(group_size)])
    start = time.perf_counter()
    group = asyncio.run(do_group_rollout(builder, policy))
    elapsed = time.perf_counter() - start
    assert policy.max_in_flight == group_size
    assert elapsed < 3 * latency  # sequential would take group_size * latency = 1.6 s
    assert len(group.trajectories_G) == group_size
    assert builder.cleanups == 1


def test_env_policies_give_each_env_its_own_policy_whichever_asks_first():
    class LateStart(CountdownEnv):
        """Env 0 renders its prompt last, as a code env rendering in a thread can."""

        def __init__(self, delay: float) -> None:
            super().__init__()
            self.delay = delay

        async def initial_observation(self) -> tuple[types.ModelInput, list[int]]:
            await asyncio.sleep(self.delay)
            return await super().initial_observation()

    made: list[int] = []

    def make(j: int) -> FakePolicy:
        made.append(j)
        return FakePolicy(tokens=[70 + j])

    builder = CountdownBuilder([LateStart(0.05), LateStart(0.0), LateStart(0.0)])
    group = asyncio.run(do_group_rollout(builder, EnvPolicies(make)))
    assert sorted(made) == [0, 1, 2]
    assert [t.transitions[0].ac.tokens for t in group.trajectories_G] == [[70], [71], [72]]


def test_group_rewards_are_added_to_step_rewards():
    builder = CountdownBuilder(
        [CountdownEnv(step_reward=1.0), CountdownEnv(step_reward=0.0)], group_rewards=[0.5, -0.5]
    )
    group = asyncio.run(do_group_rollout(builder, FakePolicy()))
    assert group.final_rewards_G == [0.5, -0.5]
    assert group.metrics_G == [{"group_bonus": 0.5}, {"group_bonus": -0.5}]
    assert group.get_total_rewards() == [1.5, -0.5]


def test_failing_env_cancels_siblings_and_cleanup_still_runs():
    class BrokenStartEnv(CountdownEnv):
        async def initial_observation(self):
            raise RuntimeError("sandbox failed to start")

    policy = FakePolicy(latency=2.0)
    builder = CountdownBuilder([CountdownEnv(), BrokenStartEnv(), CountdownEnv()])
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="sandbox failed to start"):
        asyncio.run(do_group_rollout(builder, policy))
    assert time.perf_counter() - start < 1.0  # the 2 s samples were cancelled, not awaited
    assert builder.cleanups == 1


def test_cleanup_runs_when_make_envs_or_group_rewards_fail():
    class NoEnvs(CountdownBuilder):
        async def make_envs(self):
            raise ConnectionError("no capacity")

    class BadRewards(CountdownBuilder):
        async def compute_group_rewards(self, trajectory_group, env_group):
            return [(1.0, {})]  # one reward for two trajectories

    no_envs, bad_rewards = NoEnvs(), BadRewards()
    with pytest.raises(ConnectionError):
        asyncio.run(do_group_rollout(no_envs, FakePolicy()))
    with pytest.raises(ValueError, match="one \\(reward, metrics\\) per trajectory"):
        asyncio.run(do_group_rollout(bad_rewards, FakePolicy()))
    assert no_envs.cleanups == 1 and bad_rewards.cleanups == 1


def test_cleanup_completes_when_the_rollout_is_cancelled():
    class SlowCleanup(CountdownBuilder):
        async def cleanup(self):
            await asyncio.sleep(0.05)
            self.cleanups += 1

    builder = SlowCleanup()

    async def main():
        task = asyncio.create_task(do_group_rollout(builder, FakePolicy(latency=5.0)))
        await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.sleep(0.01)
        task.cancel()  # a second Ctrl-C while cleanup runs must not abandon it
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert builder.cleanups == 1


def test_duck_typed_env_without_extra_and_builder_without_cleanup():
    class OldStyleEnv:  # written against an older tinker-cookbook: step(action) only
        async def initial_observation(self):
            return ob(4, 5), [0]

        async def step(self, action):
            return StepResult(1.0, True, types.ModelInput.empty(), [0])

    class OldStyleBuilder:
        async def make_envs(self):
            return [OldStyleEnv(), OldStyleEnv()]

        async def compute_group_rewards(self, trajectory_group, env_group):
            return [(0.0, {}) for _ in trajectory_group]

    builder: Any = OldStyleBuilder()
    group = asyncio.run(do_group_rollout(builder, FakePolicy()))
    assert group.get_total_rewards() == [1.0, 1.0]


def test_initial_observation_overflow_ends_the_episode_without_sampling():
    class TooLong(CountdownEnv):
        async def initial_observation(self):
            return InitialObservationOverflow(reward=-0.1, metrics={"stop/max_tokens": 1.0})

    policy = FakePolicy()
    traj = asyncio.run(do_single_rollout(policy, TooLong()))
    assert policy.calls == []
    assert traj.stop_reason == "max_tokens"
    assert [t.reward for t in traj.transitions] == [-0.1]
    assert trajectory_to_data(traj, 1.0) == []


def test_batch_rollouts_run_groups_concurrently_and_keep_order():
    policy = FakePolicy(latency=0.2)
    builders = [CountdownBuilder([CountdownEnv(step_reward=float(i))] * 1) for i in range(4)]
    start = time.perf_counter()
    groups = asyncio.run(do_batch_rollouts(builders, policy))
    assert time.perf_counter() - start < 0.6
    assert [g.get_total_rewards() for g in groups] == [[0.0], [1.0], [2.0], [3.0]]
    assert all(b.cleanups == 1 for b in builders)
