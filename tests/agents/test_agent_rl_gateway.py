"""The issue's "Done when" for token records: `kitchen run agent_rl` (an agent with a calculator
tool) for 2 RL steps on kitchen/tiny-llama on the local engine, the agent's calls through the agent
gateway the run opens, in-process and over HTTP. What forward_backward received equals the
gateway's records byte for byte, and each 2-turn episode is one datum."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from tests.agents.helpers import assert_trained_on_two_turn_records, run_on_recorded_gateway

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
    from kitchen.serve.gateway.gateway import Gateway

    closed: list[bool] = []

    def recording_close(self: Any, close: Any = Gateway.close) -> None:
        closed.append(True)
        close(self)

    monkeypatch.setattr(Gateway, "close", recording_close)
    cfg = {"agent_transport": transport, "mode": mode}
    result, taken, trained = run_on_recorded_gateway(monkeypatch, "agent_rl", cfg, tmp_path)
    assert result.steps == 2 and closed == [True]  # the run opened its gateway and closed it
    assert_trained_on_two_turn_records(taken, trained, mode)  # ask, then answer
    steps = [m for m in result.metrics if "agents/splits" in m]
    assert [(m["agents/splits"], m["num_datums"]) for m in steps] == [(0.0, 4), (0.0, 4)]
