"""Pure pieces of the RL stages: substep splitting, transcripts, version metrics, concurrent
rollouts, and the async rollout pool's staleness bound."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from tinker import types

from kitchen.adapters.fake.tokenizer import FakeTokenizer
from kitchen.workflows.reinforcement.async_pool import AsyncRolloutPool
from kitchen.workflows.reinforcement.rollout import transcript_records
from kitchen.workflows.reinforcement.stages import version_metrics
from kitchen.workflows.reinforcement.train import split_into
from tests.rl_core.rl_core_fakes import LatencySampler, single_turn_group
from train_core.completers import GroupedTokenCompleter
from train_core.rl import do_batch_rollouts


def test_split_into_gives_contiguous_near_equal_chunks():
    assert split_into(list(range(7)), 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert split_into([1, 2], 5) == [[1], [2]]  # never more chunks than items
    assert split_into(list(range(4)), 1) == [[0, 1, 2, 3]]
    with pytest.raises(ValueError):
        split_into([1], 0)


def test_version_metrics_measure_staleness_against_the_step():
    m = version_metrics([3, 4, 4, 5], step=5)
    assert m["sampling_client/step_min"] == 3 and m["sampling_client/step_max"] == 5
    assert m["async/staleness_max"] == 2 and m["async/staleness_mean"] == 1.0


def test_transcript_records_hold_prompt_response_and_reward_per_group():
    tok = FakeTokenizer()

    class Builder:
        def logging_tags(self) -> list[str]:
            return ["toy"]

    group = single_turn_group([1.0, 0.0])
    # rl_core fakes use tokens 0..2 for the prompt and 100.. for actions: bytes for FakeTokenizer
    records = transcript_records(7, [group], [Builder()], [6], tok)
    assert len(records) == 1
    rec = records[0]
    assert (rec["iteration"], rec["group"], rec["policy_version"], rec["tags"]) == (
        7,
        0,
        6,
        ["toy"],
    )
    assert [t["reward"] for t in rec["trajectories"]] == [1.0, 0.0]
    turn = rec["trajectories"][0]["turns"][0]
    assert turn["prompt"] == tok.decode([0, 1, 2]) and turn["response"] == tok.decode([100, 101])


def test_batch_rollouts_overlap_sampling_latency_across_groups():
    from cookbook.envs.arithmetic import ArithmeticEnvs
    from train_core.renderers import get_renderer
    from train_core.rl.types import RLEnvContext

    renderer = get_renderer("chatml", FakeTokenizer())
    train, _ = ArithmeticEnvs(groups_per_batch=6, group_size=4, test_problems=0)(
        RLEnvContext(renderer, renderer.tokenizer)
    )
    sampler = LatencySampler(latency=0.2)

    async def go() -> float:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await do_batch_rollouts(list(train.get_batch(0)), GroupedTokenCompleter(sampler, 8))
        return loop.time() - t0

    elapsed = asyncio.run(go())
    assert elapsed < 0.2 * 3  # 24 rollouts: about one latency, far from 24
    assert sampler.calls == [4] * 6


class _Dataset:
    """Batches of builders whose groups finish after delays[builder id] seconds."""

    def __init__(self, n_batches: int, per_batch: int) -> None:
        self.n_batches, self.per_batch = n_batches, per_batch

    def get_batch(self, index: int) -> list[Any]:
        return [_Builder(index * self.per_batch + i) for i in range(self.per_batch)]

    def __len__(self) -> int:
        return self.n_batches


@dataclass
class _Builder:
    ident: int

    async def make_envs(self) -> list[Any]:
        return [_Env(self.ident)]

    async def compute_group_rewards(self, trajectory_group: Any, env_group: Any) -> Any:
        return [(0.0, {}) for _ in trajectory_group]

    def logging_tags(self) -> list[str]:
        return []


@dataclass
class _Env:
    ident: int

    async def initial_observation(self) -> Any:
        return types.ModelInput.from_ints([self.ident + 1]), [0]

    async def step(self, action: Any, *, extra: Any = None) -> Any:
        from train_core.rl import StepResult

        return StepResult(1.0, True, types.ModelInput.empty(), [0])


class _Policy:
    """Token policy whose call for prompt ident 1 (builder 0) hangs until released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def __call__(self, model_input: Any, stop: Any, *, max_tokens: Any = None) -> Any:
        from train_core.completers import TokensWithLogprobs

        if model_input.to_ints() == [1] and not self.release.is_set():
            await self.release.wait()
        return TokensWithLogprobs([5], [-0.1])


def test_pool_bounds_in_flight_groups_and_drops_stale_ones():
    async def go() -> tuple[list[list[int]], int, int]:
        policy = _Policy()
        pool = AsyncRolloutPool(
            _Dataset(n_batches=4, per_batch=2), 4, 2, 1, lambda s, where: policy, "sampler-0", 0
        )
        pool.start(0)
        await asyncio.sleep(0.01)
        started = pool.capacity
        taken = []
        for step in range(4):
            if step == 3:
                policy.release.set()  # builder 0 finishes now, 3 versions late
            batch = await pool.take(2, step)
            taken.append([g.version for g in batch])
            pool.publish(f"sampler-{step + 1}", step + 1)
        dropped = pool.dropped
        await pool.close()
        return taken, started, dropped

    taken, capacity, dropped = asyncio.run(go())
    assert capacity == 4  # groups_per_batch * (max_steps_off_policy + 1)
    assert dropped == 1
    for step, versions in enumerate(taken):
        assert len(versions) == 2 and all(step - v <= 1 for v in versions)
    assert 3 in taken[-1]  # the dropped group came back with fresh weights
