"""Every seed Kitchen sends fits a signed 32-bit int: JAX-based Tinker-protocol servers refuse
larger ones with HTTP 400 (docs/servers.md)."""

from __future__ import annotations

from typing import Any

import pytest

from kitchen.adapters.fake import FakeBackend
from kitchen.app.launch import run
from tests.rl_workflow.helpers import fake_backend

RL = {"num_batches": 2, "groups_per_batch": 2, "group_size": 2, "eval_every": 1}
DISTILL = {"save_every": 0, "no_register": True, "max_tokens": 64}
RUNS = {
    "rl_basic": RL,
    "rl_basic async": {**RL, "mode": "async", "eval_every": 0},
    "math_rl": {**RL, "num_test_problems": 2},
    "on_policy_distillation": {**DISTILL, "num_batches": 2},
    "prompt_distillation": {
        "max_prompts": 4,
        "batch_size": 4,
        "save_every": 0,
        "no_register": True,
    },
}


@pytest.mark.parametrize("name", RUNS)
def test_every_seed_a_recipe_sends_is_below_2_31(name: str, tmp_path: Any) -> None:
    fake: FakeBackend = fake_backend()
    if name == "math_rl":
        fake.responder = lambda prompt: "so \\boxed{24}"
    elif "distillation" in name:
        fake.responder = lambda prompt: "Bake it at 180 C."
    run(name.split()[0], RUNS[name], backend=fake, log_dir=tmp_path)
    assert fake.sample_seeds, "the run sampled nothing"
    sent = [s for s in fake.sample_seeds if s is not None]
    assert sent and all(0 <= s < 2**31 for s in sent), max(sent)
