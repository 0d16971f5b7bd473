"""Two iterations of code_rl on the tiny model: the local engine, the local sandbox, HumanEval."""

from __future__ import annotations

import json

import pytest

from kitchen.adapters.sandbox.local import LocalSandbox
from kitchen.app.launch import run


@pytest.mark.slow
def test_two_iterations_on_the_tiny_model_with_the_local_sandbox(tmp_path, monkeypatch):
    executed: list[str] = []
    real_execute = LocalSandbox._execute

    def counting_execute(self, program, *args, **kwargs):
        executed.append(program)
        return real_execute(self, program, *args, **kwargs)

    monkeypatch.setattr(LocalSandbox, "_execute", counting_execute)
    result = run(
        "code_rl",
        {
            "model_name": "kitchen/tiny-llama",
            "num_batches": 2,
            "group_size": 2,
            "groups_per_batch": 2,
            "max_tokens": 24,
            "humaneval_limit": 2,
            "humaneval_max_tokens": 24,
            "ppo_epochs": 2,
            "gae_lambda": 0.9,
            "no_register": True,
        },
        backend="local",
        log_dir=tmp_path,
    )
    assert result.steps == 2
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").open()]
    train = [r for r in records if "env/all/reward/total" in r]
    evals = [r for r in records if "humaneval/pass@1" in r]
    assert [r["step"] for r in train] == [0, 1] and [r["step"] for r in evals] == [0, 2]
    assert all(r["optim/epochs"] == 2 and r["env/all/total_episodes"] == 4 for r in train)
    assert sorted(p.name for p in (tmp_path / "rollouts").iterdir()) == [
        "iter_000000.jsonl",
        "iter_000001.jsonl",
    ]
    # The availability check, then HumanEval's 2 problems graded before and after training.
    assert len(executed) >= 5
    assert set(result.state.eval_results) == {"humaneval_before/pass@1", "humaneval/pass@1"}
    assert result.state.sandbox is None
