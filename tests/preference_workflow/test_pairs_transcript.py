"""The pairs transcript of a DPO run: a few pairs per logged step with their implicit rewards,
which must agree with the step's own DPO metrics (the same policy and reference logprobs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kitchen.app.launch import run

from .helpers import comparison, write_jsonl


def test_pairs_jsonl_holds_each_steps_pairs_and_their_implicit_rewards(tmp_path: Path) -> None:
    rows = [comparison(i, label="A" if i % 2 else "B") for i in range(6)]
    data = write_jsonl(tmp_path / "prefs.jsonl", rows)
    overrides = {"model_name": "kitchen/tiny-llama", "dataset": str(data), "batch_size": 2}
    overrides |= {"learning_rate": 1e-2, "lora_rank": 8, "save_every": 0, "dpo_beta": 0.5}
    run("dpo", overrides, backend="local", log_dir=tmp_path / "run", max_steps=3)

    pairs = [json.loads(line) for line in (tmp_path / "run/pairs.jsonl").open()]
    metrics = {r["step"]: r for r in map(json.loads, (tmp_path / "run/metrics.jsonl").open())
               if "dpo_loss" in r}  # fmt: skip
    assert [(p["step"], p["pair"]) for p in pairs] == [(s, i) for s in range(3) for i in range(2)]
    for pair in pairs:
        assert pair["prompt"] and pair["chosen"] and pair["rejected"]
        assert pair["chosen"] != pair["rejected"]
        assert pair["margin"] == pytest.approx(pair["chosen_reward"] - pair["rejected_reward"])
    for step, record in metrics.items():
        mine = [p for p in pairs if p["step"] == step]  # every pair of the step (batch_size 2)
        for key in ("chosen_reward", "rejected_reward", "margin"):
            mean = sum(p[key] for p in mine) / len(mine)
            # float32 sums of each answer's logprobs, subtracted in another order: ~1e-5 apart
            # (1.2e-5 on an Intel Xeon with AMX), while the margins reach 2e-2 by step 2 (below)
            assert mean == pytest.approx(record[key], rel=1e-4, abs=1e-4), (step, key)
    assert pairs[0]["margin"] == pytest.approx(0.0, abs=2e-3)  # step 0: policy == reference (bf16)
    assert any(abs(p["margin"]) > 2e-2 for p in pairs if p["step"] == 2), pairs  # then it moves
