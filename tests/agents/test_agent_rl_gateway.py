"""The issue's "Done when" for token records: `kitchen run agent_rl` (an agent with a calculator
tool) for 2 RL steps on kitchen/tiny-llama on the local engine, the agent's calls through the agent
gateway the run opens, in-process and over HTTP. What forward_backward received equals the
gateway's records byte for byte, and each 2-turn episode is one datum."""

from __future__ import annotations

import importlib.util
from collections import Counter
from typing import Any

import numpy as np
import pytest

from kitchen.app.launch import run

local_engine = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="local engine not available"
)


def _episode(records: list[Any]) -> tuple[bytes, bytes]:
    """The one datum an episode of extending calls trains as: its last prompt + reply, shifted;
    the recorded logprobs on the sampled tokens, 0 on the observation tokens."""
    tokens: list[int] = []
    logprobs: list[float] = []
    for record in records:
        assert record.prompt_tokens[: len(tokens)] == tuple(tokens)  # it extends: one datum
        new = record.prompt_tokens[len(tokens) :]
        tokens += [*new, *record.sampled_tokens]
        logprobs += [0.0] * len(new) + list(record.sampled_logprobs)
    return (
        np.asarray(tokens[1:], dtype=np.int64).tobytes(),
        np.asarray(logprobs[1:], dtype=np.float32).tobytes(),
    )


def _trained(datum: Any) -> tuple[bytes, bytes]:
    return (
        datum.loss_fn_inputs["target_tokens"].to_numpy().astype(np.int64).tobytes(),
        datum.loss_fn_inputs["logprobs"].to_numpy().astype(np.float32).tobytes(),
    )


@local_engine
@pytest.mark.slow
@pytest.mark.parametrize(
    ("transport", "mode"), [("in_process", "sync"), ("http", "sync"), ("http", "async")]
)
def test_two_steps_train_on_the_gateways_records_byte_for_byte(
    monkeypatch: Any, tmp_path: Any, transport: str, mode: str
) -> None:
    from kitchen.adapters.local.training_client import LocalTrainingClient
    from kitchen.serve.gateway.gateway import Gateway

    taken: dict[str, list[Any]] = {}
    take, forward_backward = Gateway.take, LocalTrainingClient.forward_backward
    trained: list[Any] = []
    closed: list[bool] = []

    def recording_take(self: Any, address: str) -> list[Any]:
        taken[address] = take(self, address)
        return taken[address]

    def capturing_forward_backward(self: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        trained.extend(data)
        return forward_backward(self, data, *args, **kwargs)

    def recording_close(self: Any, close: Any = Gateway.close) -> None:
        closed.append(True)
        close(self)

    monkeypatch.setattr(Gateway, "take", recording_take)
    monkeypatch.setattr(Gateway, "close", recording_close)
    monkeypatch.setattr(LocalTrainingClient, "forward_backward", capturing_forward_backward)
    if transport == "http":  # every rollout's client must go over the socket

        def in_process_client(self: Any, address: str) -> Any:
            raise AssertionError(f"{address}: an in-process client under agent_transport http")

        monkeypatch.setattr(Gateway, "client", in_process_client)
    cfg = {
        "model_name": "kitchen/tiny-llama",
        "num_batches": 2,
        "groups_per_batch": 2,
        "group_size": 2,
        "max_tokens": 6,
        "save_every": 0,
        "register_model": False,
        "agent_transport": transport,
        "mode": mode,
    }
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
    assert Counter(_trained(d) for d in trained) == Counter(_episode(r) for r in taken.values())
    steps = [m for m in result.metrics if "agents/splits" in m]
    assert [(m["agents/splits"], m["num_datums"]) for m in steps] == [(0.0, 4), (0.0, 4)]
