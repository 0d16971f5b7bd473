"""agent_rl at `--nproc 2`: two gloo ranks on this CPU, the agents' calls through the HTTP gateway
that rank 0 opens. As at one process (tests/agents/test_agent_rl_gateway.py), what
forward_backward received equals the gateway's records byte for byte and each 2-turn episode is
one datum; rank 0 is a process of its own, so both sides come back through
rank_probe/sitecustomize.py.

The losses are not compared with a `--nproc 1` run's, as test_nproc.py compares rl_basic's: they
are not meant to be equal. Each request draws its seed in the order it reaches the gateway, and
the agents' concurrent calls reach it in no fixed order: two `--nproc 1` runs of this configuration (float32 and
MKL_CBWR=AUTO,STRICT, as test_nproc.py runs) gave step 0's first turns the same samples in another
order across the rollouts, so other second turns, and optim/entropy 6.9189 against 6.9135. What
holds at any N is checked instead: the trainer's logprobs of the sampled tokens are the
sampler's."""

from __future__ import annotations

import os
import pickle
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import kitchen
from tests.agents.helpers import TWO_TINY_STEPS, episode_datum, trained_datum

PROBE = Path(__file__).parent / "rank_probe"


def _probed(path: Path) -> tuple[dict[str, list[Any]], list[Any]]:
    """What rank 0's gateway handed the seam, by address, and every datum it trained on."""
    taken: dict[str, list[Any]] = {}
    trained: list[Any] = []
    with path.open("rb") as f:
        while f.peek(1):
            kind, value = pickle.load(f)
            if kind == "take":
                taken[value[0]] = value[1]
            else:
                trained += value
    return taken, trained


@pytest.mark.slow
def test_agent_rl_on_two_ranks_trains_on_the_gateways_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = tmp_path / "rank0.pickle"
    monkeypatch.setenv("KITCHEN_TEST_RANK_PROBE", str(probe))
    path = [str(PROBE), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))
    cfg = {**TWO_TINY_STEPS, "agent_transport": "http"}
    result = kitchen.run("agent_rl", cfg, log_dir=tmp_path / "run", nproc=2)
    assert result.steps == 2
    taken, trained = _probed(probe)
    assert sorted(taken) == [f"{b}-{g}-{r}" for b in "01" for g in "01" for r in "01"]
    assert all(len(records) == 2 for records in taken.values())  # ask, then answer
    assert all(records[1].extends_previous for records in taken.values())
    versions = [records[0].sampler_version for _, records in sorted(taken.items())]
    assert versions == [0] * 4 + [1] * 4  # each step samples with its own weights
    assert Counter(map(trained_datum, trained)) == Counter(map(episode_datum, taken.values()))
    steps = [m for m in result.metrics if "agents/splits" in m]
    assert [(m["agents/splits"], m["num_datums"]) for m in steps] == [(0.0, 4), (0.0, 4)]
    # the two ranks' trainer gives the sampled tokens the logprobs rank 0's sampler recorded
    assert all(abs(m["optim/kl_sample_train_v1"]) < 1e-3 for m in steps)
