"""The DPO workflow end to end on the fake backend: loss sent, futures awaited, pairs counted, odd
batch sizes, ties and overlong pairs handled, LR schedule, evaluation cadence, checkpoints."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from kitchen.adapters.fake import FakeBackend
from kitchen.app.launch import run
from kitchen.engine.errors import DataError
from kitchen.engine.runner import RunResult
from kitchen.engine.stage import Context
from kitchen.workflows.common.batches import GetBatch, ShuffleEpoch
from kitchen.workflows.preference.state import PreferenceState

from .helpers import comparison, write_jsonl


def prefs_file(tmp_path: Path) -> Path:
    rows = [comparison(i, label="A" if i % 2 else "B") for i in range(7)]
    rows.append(comparison(7, label="Tie"))
    rows.append(comparison(8, chosen_words=40))  # ~900 tokens with the byte-level fake tokenizer
    return write_jsonl(tmp_path / "prefs.jsonl", rows)


def run_dpo(
    overrides: dict[str, Any], backend: FakeBackend, log_dir: Path | None = None
) -> RunResult:
    return run(
        "dpo", {"model_name": "kitchen/tiny-llama", **overrides}, backend=backend, log_dir=log_dir
    )


def step_records(result: RunResult) -> dict[int, dict[str, Any]]:
    merged: dict[int, dict[str, Any]] = {}
    for record in result.metrics:
        merged.setdefault(record["step"], {}).update(record)
    return merged


def test_dpo_trains_through_custom_loss_with_every_future_awaited(tmp_path: Path) -> None:
    data = prefs_file(tmp_path)
    fake = FakeBackend()
    result = run_dpo(
        {
            "dataset": str(data),
            "test_dataset": str(data),
            "batch_size": 3,  # odd: 6 datums a step
            "num_epochs": 2,
            "max_length": 200,
            "eval_every": 2,
            "save_every": 3,
            "learning_rate": 1e-3,
        },
        fake,
        tmp_path / "run",
    )
    # 8 usable pairs (the tie dropped, the long one truncated) -> 2 batches of 3, x 2 epochs
    assert result.steps == 4
    assert fake.loss_fns == ["custom"] * 4
    assert fake.unawaited == 0
    assert fake.optim_lrs == pytest.approx([1e-3 * (1 - s / 4) for s in range(4)])
    records = step_records(result)
    assert records[0]["data/num_pairs"] == 8
    assert records[0]["data/num_truncated"] == 1
    assert records[0]["data/dropped_tie"] == 1
    for step in range(4):
        assert records[step]["num_pairs"] == 3
        for key in ("dpo_loss", "accuracy", "margin", "chosen_reward", "rejected_reward"):
            assert math.isfinite(records[step][key]), (step, key)
        assert records[step]["learning_rate"] == pytest.approx(1e-3 * (1 - step / 4))
    # pre-step evaluation at steps 0 and 2, and once more after the last step
    assert "test/pairwise_accuracy" in records[0] and "test/pairwise_accuracy" in records[2]
    assert "test/pairwise_accuracy" not in records[1]
    assert records[4]["test/num_pairs"] == 8 and "test/chosen_nll" in records[4]
    state = result.state
    assert state.eval_results["test/num_pairs"] == 8  # type: ignore[attr-defined]
    assert state.registered_model["name"] == "dpo"  # type: ignore[attr-defined]
    checkpoints = [json.loads(line) for line in (tmp_path / "run/checkpoints.jsonl").open()]
    assert [c["name"] for c in checkpoints] == ["000003", "final"]
    assert checkpoints[0]["cursor"] == {"epoch": 1, "batch": 1}


def test_overlong_pairs_are_dropped_when_asked(tmp_path: Path) -> None:
    data = prefs_file(tmp_path)
    result = run_dpo(
        {"dataset": str(data), "test_dataset": None, "batch_size": 2, "max_length": 200,
         "overflow": "drop", "save_every": 0},
        FakeBackend(),
    )  # fmt: skip
    records = step_records(result)
    assert records[0]["data/num_pairs"] == 7
    assert records[0]["data/dropped_overflow"] == 1
    assert result.steps == 3


def test_fewer_pairs_than_batch_size_train_as_one_batch(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "few.jsonl", [comparison(i) for i in range(3)])
    fake = FakeBackend()
    result = run_dpo(
        {"dataset": str(data), "test_dataset": None, "batch_size": 8, "save_every": 0}, fake
    )
    assert result.steps == 1
    assert step_records(result)[0]["num_pairs"] == 3
    assert fake.unawaited == 0


def test_no_usable_pair_is_a_data_error_naming_why(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "ties.jsonl", [comparison(i, label="Tie") for i in range(3)])
    with pytest.raises(DataError, match=r"none of 3 comparisons gave a usable pair.*'tie': 3"):
        run_dpo({"dataset": str(data), "test_dataset": None}, FakeBackend())


def test_reference_is_the_base_model_or_the_named_reference(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "p.jsonl", [comparison(i) for i in range(4)])
    calls: list[tuple[Any, Any]] = []

    class Recording(FakeBackend):
        def create_sampling_client(self, model_path=None, base_model=None):  # type: ignore[no-untyped-def]
            calls.append((model_path, base_model))
            return super().create_sampling_client(model_path, base_model)

    run_dpo({"dataset": str(data), "test_dataset": None, "batch_size": 2}, Recording())
    run_dpo(
        {"dataset": str(data), "test_dataset": None, "reference_model_name": "kitchen/tiny-qwen"},
        Recording(),
    )
    assert calls == [(None, "kitchen/tiny-llama"), (None, "kitchen/tiny-qwen")]


def test_batches_keep_chosen_and_rejected_side_by_side() -> None:
    state = PreferenceState(train_data=[f"c{i}" if j == 0 else f"r{i}" for i in range(5) for j in (0, 1)], n_pairs=5)  # fmt: skip
    ctx = Context(state=state)
    ShuffleEpoch(seed=3, group_size=2)(ctx)
    seen = []
    for batch_idx in range(2):
        state.batch_idx = batch_idx
        GetBatch(batch_size=2, group_size=2)(ctx)
        batch = state.batch
        assert batch is not None and len(batch) == 4
        assert [b[1:] for b in batch[0::2]] == [b[1:] for b in batch[1::2]]
        assert all(b[0] == "c" for b in batch[0::2]) and all(b[0] == "r" for b in batch[1::2])
        seen += batch[0::2]
    assert len(set(seen)) == 4


def test_reference_of_a_run_from_a_checkpoint_is_its_initial_weights(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "p.jsonl", [comparison(i) for i in range(4)])
    fake = FakeBackend()
    fake.states["fake://state/sft"] = 3  # a checkpoint three optim steps in
    run_dpo(
        {"dataset": str(data), "test_dataset": None, "load_checkpoint_path": "fake://state/sft"},
        fake,
    )
    assert "create_sampling_client" not in fake.calls
    snapshot = fake.calls.index("save_weights_and_get_sampling_client")
    assert snapshot < fake.calls.index("forward_backward_custom")


def test_resume_continues_after_the_last_checkpoint_without_replaying(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "p.jsonl", [comparison(i) for i in range(10)])
    cfg = {"dataset": str(data), "test_dataset": None, "batch_size": 2, "save_every": 2}
    first, second = FakeBackend(), FakeBackend()
    run("dpo", {"model_name": "kitchen/tiny-llama", **cfg}, backend=first,
        log_dir=tmp_path / "run", max_steps=3)  # fmt: skip
    second.states.update(first.states)  # the checkpoint files outlive the first process
    result = run("dpo", {"model_name": "kitchen/tiny-llama", **cfg}, backend=second,
                 log_dir=tmp_path / "run", if_exists="resume")  # fmt: skip
    assert first.loss_fns == ["custom"] * 3
    # --max-steps 3 ended with a final checkpoint after step 2: the resume trains steps 3 and 4
    assert second.loss_fns == ["custom"] * 2
    assert second.calls[0] == "create_training_client_from_state_with_optimizer"
    assert result.steps == 5 and second.unawaited == 0
