"""DPO on the local engine with the tiny model: the gradient moves the log-ratio margin the right
way, and a 3-step recipe run completes with finite metrics and a final checkpoint."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tinker import types

from kitchen.ports import BackendSettings
from kitchen.workflows.preference.stages import labeled_comparison
from train_core.preference import build_dpo_data, make_dpo_loss_fn
from train_core.renderers import get_renderer
from train_core.scoring import full_sequence, target_logprobs

from .helpers import comparison, write_jsonl

local = pytest.importorskip("kitchen.adapters.local")
pytest.importorskip("torch")
pytest.importorskip("peft")

TINY = "kitchen/tiny-llama"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    engine = local.create_local_backend(
        BackendSettings(log_dir=tmp_path_factory.mktemp("dpo"), seed=0)
    )
    yield engine
    engine.close()


def test_dpo_steps_raise_chosen_over_rejected_log_ratio(backend: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=8, seed=0)
    renderer = get_renderer("chatml", client.get_tokenizer())
    data, stats = build_dpo_data([labeled_comparison(comparison(1))], renderer, 256)
    assert stats.num_pairs == 1
    reference = backend.create_sampling_client(base_model=TINY)
    ref = [target_logprobs(reference.compute_logprobs(full_sequence(d)).result()) for d in data]
    loss_fn = make_dpo_loss_fn(ref, beta=0.1)
    margins, losses = [], []
    for _ in range(4):
        out = client.forward_backward_custom(data, loss_fn).result()
        client.optim_step(types.AdamParams(learning_rate=1e-3)).result()
        margins.append(out.metrics["margin"])
        losses.append(out.metrics["dpo_loss"])
    # Before any step the policy is the reference: no margin, loss log 2.
    assert abs(margins[0]) < 1e-3 and losses[0] == pytest.approx(math.log(2), abs=1e-3)
    assert all(b > a for a, b in itertools.pairwise(margins)), margins
    assert losses[-1] < losses[0]


def test_dpo_recipe_runs_three_steps_on_the_tiny_model(tmp_path: Path) -> None:
    from kitchen.app.launch import run

    rows = [comparison(i, label="A" if i % 2 else "B") for i in range(8)]
    data = write_jsonl(tmp_path / "prefs.jsonl", rows)
    result = run(
        "dpo",
        {
            "model_name": TINY,
            "dataset": str(data),
            "test_dataset": str(data),
            "test_size": 4,
            "batch_size": 2,
            "lora_rank": 8,
            "learning_rate": 1e-3,
            "eval_every": 2,
            "save_every": 0,
        },
        backend="local",
        log_dir=tmp_path / "run",
        max_steps=3,
    )
    assert result.steps == 3
    records = [json.loads(line) for line in (tmp_path / "run/metrics.jsonl").open()]
    steps = {r["step"]: r for r in records if "dpo_loss" in r}
    assert sorted(steps) == [0, 1, 2]
    for record in steps.values():
        assert record["num_pairs"] == 2
        assert all(math.isfinite(record[k]) for k in ("dpo_loss", "accuracy", "margin"))
    assert any("test/pairwise_accuracy" in r for r in records)
    final = [json.loads(line) for line in (tmp_path / "run/checkpoints.jsonl").open()][-1]
    assert final["final"] is True and Path(final["state_path"]).exists()
