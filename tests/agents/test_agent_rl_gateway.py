"""The issue's "Done when" for token records: `kitchen run agent_rl` (an agent with a calculator
tool) for 2 RL steps on kitchen/tiny-llama on the local engine, the agent's calls through the agent
gateway the run opens, in-process and over HTTP. What forward_backward received equals the
gateway's records byte for byte, and each 2-turn episode is one datum."""

from __future__ import annotations

import importlib.util
from collections import Counter
from typing import Any

import pytest

from kitchen.app.launch import run
from tests.agents.helpers import (
    TWO_TINY_STEPS,
    episode_datum,
    record_gateway_takes,
    trained_datum,
)
from tests.helpers import record_forward_backward, sent_datums

local_engine = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="local engine not available"
)


@local_engine
@pytest.mark.slow
@pytest.mark.parametrize(
    ("transport", "mode"), [("in_process", "sync"), ("http", "sync"), ("http", "async")]
)
def test_two_steps_train_on_the_gateways_records_byte_for_byte(
    monkeypatch: Any, tmp_path: Any, transport: str, mode: str
) -> None:
    from kitchen.adapters.local.clients.training_client import LocalTrainingClient
    from kitchen.serve.gateway.gateway import Gateway

    taken = record_gateway_takes(monkeypatch)
    calls = record_forward_backward(monkeypatch, LocalTrainingClient)
    closed: list[bool] = []

    def recording_close(self: Any, close: Any = Gateway.close) -> None:
        closed.append(True)
        close(self)

    monkeypatch.setattr(Gateway, "close", recording_close)
    if transport == "http":  # every rollout's client must go over the socket

        def in_process_client(self: Any, address: str) -> Any:
            raise AssertionError(f"{address}: an in-process client under agent_transport http")

        monkeypatch.setattr(Gateway, "client", in_process_client)
    cfg = {**TWO_TINY_STEPS, "agent_transport": transport, "mode": mode}
    result = run("agent_rl", cfg, backend="local", log_dir=tmp_path)
    assert result.steps == 2 and closed == [True]  # the run opened its gateway and closed it
    assert sorted(taken) == [f"{b}-{g}-{r}" for b in "01" for g in "01" for r in "01"]
    assert all(len(records) == 2 for records in taken.values())  # ask, then answer
    assert all(records[1].extends_previous for records in taken.values())
    versions = [records[0].sampler_version for _, records in sorted(taken.items())]
    if mode == "sync":  # each step samples with its own weights
        assert versions == [0] * 4 + [1] * 4
    else:  # within max_steps_off_policy of the step that trains them
        assert set(versions) <= {0, 1}
    trained = sent_datums(calls)
    assert Counter(map(trained_datum, trained)) == Counter(map(episode_datum, taken.values()))
    steps = [m for m in result.metrics if "agents/splits" in m]
    assert [(m["agents/splits"], m["num_datums"]) for m in steps] == [(0.0, 4), (0.0, 4)]
