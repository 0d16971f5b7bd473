"""agent_rl on `--backend tinker` against a `kitchen serve` it starts: the seam and the run's
gateway over the Tinker SDK's sampling clients (2 steps, tiny-llama), on-policy from the records."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import pytest

from kitchen.app.launch import run
from tests.agents.helpers import TWO_TINY_STEPS
from tests.examples.helpers import load_example


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="kitchen serve needs torch")
@pytest.mark.slow
def test_two_agent_steps_on_the_tinker_backend_through_kitchen_serve(monkeypatch: Any) -> None:
    serve = load_example("swap_backend").kitchen_serve
    cfg = dict(TWO_TINY_STEPS)
    with serve("kitchen/tiny-llama") as url:
        monkeypatch.setitem(os.environ, "TINKER_BASE_URL", url)
        monkeypatch.setitem(os.environ, "TINKER_API_KEY", "tml-local")
        result = run("agent_rl", cfg, backend="tinker")
    steps = [m for m in result.metrics if "agents/calls" in m]
    assert [(m["agents/calls"], m["agents/splits"], m["num_datums"]) for m in steps] == [
        (8.0, 0.0, 4),
        (8.0, 0.0, 4),
    ]
    # the gateway's recorded logprobs are the ones the service's learner computes
    assert all(abs(m["optim/kl_sample_train_v1"]) < 1e-3 for m in steps)
