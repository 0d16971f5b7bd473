"""off_policy_distillation: the plan (teacher top-K on every batch and on the held-out data), the
cookbook preset, and a 2-step run on tiny-llama (teacher and student) whose training datums carry
[N, K] targets and whose held-out teacher-student cross-entropy is measured before and after."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kitchen.app.cli import app
from kitchen.app.launch import run
from kitchen.app.resolve import get_recipe, resolve_config


def sharegpt_sums(folder: Path, n: int, answer: Callable[[int], str]) -> Path:
    """An OpenThoughts3-shaped JSONL of `n` rows: "What is i + i?", then `answer(i)`."""
    rows = [
        {"conversations": [{"from": "human", "value": f"What is {i} + {i}?"},
                           {"from": "gpt", "value": answer(i)}]}
        for i in range(n)
    ]  # fmt: skip
    path = folder / "ot3.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_dry_run_plans_teacher_targets_for_each_batch_and_the_held_out_data() -> None:
    args = ["run", "off_policy_distillation", "--dry-run", "n_teacher_targets=7"]
    result = CliRunner().invoke(app, args, terminal_width=300)
    assert result.exit_code == 0, result.output
    assert "teacher_topk_batch(field='batch', topk=7" in result.output
    assert "teacher_topk_test_data(field='test_data', topk=7" in result.output
    assert "loss=SoftCrossEntropyLoss()" in result.output


def test_cookbook_preset_holds_train_off_policy_defaults() -> None:
    cfg = resolve_config(get_recipe("off_policy_distillation"), preset="cookbook").config
    assert (cfg.n_teacher_targets, cfg.batch_size, cfg.lora_rank) == (20, 64, 32)
    assert (cfg.checkpoint.save_every, cfg.evaluation.every) == (10, 20)
    assert (cfg.model_name, cfg.teacher_model) == ("Qwen/Qwen3.5-9B-Base", "Qwen/Qwen3.5-9B")


@pytest.mark.slow
def test_two_steps_on_tiny_llama_train_on_top_k_targets(tmp_path, monkeypatch) -> None:
    from kitchen.adapters.local.clients.training_client import LocalTrainingClient

    shapes: list[tuple[int, ...]] = []
    original = LocalTrainingClient.forward_backward

    def recording(self, data, loss_fn, *args, **kwargs):
        shapes.extend(tuple(d.loss_fn_inputs["target_tokens"].shape) for d in data)
        assert loss_fn == "cross_entropy"
        return original(self, data, loss_fn, *args, **kwargs)

    monkeypatch.setattr(LocalTrainingClient, "forward_backward", recording)
    overrides = {
        "model_name": "kitchen/tiny-llama", "teacher_model": "kitchen/tiny-llama", "save_every": 0,
        "no_register": True, "batch_size": 2, "n_teacher_targets": 4, "eval_every": 1,
        "max_length": 64,
    }  # fmt: skip
    result = run(
        "off_policy_distillation", overrides, backend="local", log_dir=tmp_path, max_steps=2
    )
    assert result.steps == 2
    assert len(shapes) == 4 and all(len(s) == 2 and s[1] == 4 for s in shapes)
    ce = [m["test/teacher_ce"] for m in result.metrics if "test/teacher_ce" in m]
    train_ce = [m["train_teacher_ce"] for m in result.metrics if "train_teacher_ce" in m]
    assert len(ce) == 3 and len(train_ce) == 2  # before each step, and after the last
    assert all(math.isfinite(x) and x > 0 for x in ce + train_ce)


@pytest.mark.slow
def test_a_streamed_sharegpt_file_trains_batch_by_batch(tmp_path) -> None:
    """stream_dataset: OpenThoughts3-shaped rows from a local JSONL, read as each step reaches
    them; the stream's row count says only the steps' rows were read."""
    path = sharegpt_sums(tmp_path, 40, lambda i: f"<think>{i} and {i}</think> {2 * i}")
    overrides = {
        "model_name": "kitchen/tiny-llama", "teacher_model": "kitchen/tiny-llama", "save_every": 0,
        "no_register": True, "batch_size": 2, "n_teacher_targets": 4, "max_length": 64,
        "dataset": str(path), "test_dataset": None, "stream_dataset": True, "max_prompts": 6,
    }  # fmt: skip
    result = run("off_policy_distillation", overrides, backend="local", log_dir=tmp_path / "run")
    assert result.steps == 3  # max_prompts // batch_size
    read = [m["stream/rows_read"] for m in result.metrics if "stream/rows_read" in m]
    assert read == [2, 4, 6]  # of 40: rows are pulled as training reaches them


def test_a_stream_is_read_once() -> None:
    result = CliRunner().invoke(
        app, ["run", "off_policy_distillation", "--dry-run", "stream_dataset=true", "num_epochs=2"]
    )
    assert result.exit_code == 2 and "num_epochs must be 1" in result.output


@pytest.mark.slow
def test_two_sources_are_each_distilled_from_their_own_teacher(tmp_path, monkeypatch) -> None:
    """extra_sources: every batch holds each source's share (weights 1 : 1 of 4), and each datum
    is scored by its own source's teacher."""
    from kitchen.adapters.local.clients.sampling_client import LocalSamplingClient

    scorers: list[int] = []
    sample = LocalSamplingClient.sample

    def recording(self, prompt, *args, **kwargs):
        if kwargs.get("topk_prompt_logprobs"):
            scorers.append(id(self))
        return sample(self, prompt, *args, **kwargs)

    monkeypatch.setattr(LocalSamplingClient, "sample", recording)
    extra = {"dataset": "bundled:chat", "teacher_model": "kitchen/tiny-qwen", "split": "test"}
    overrides = {
        "model_name": "kitchen/tiny-llama", "teacher_model": "kitchen/tiny-llama", "save_every": 0,
        "no_register": True, "batch_size": 4, "n_teacher_targets": 4, "max_length": 64,
        "test_dataset": None, "extra_sources": [extra],
    }  # fmt: skip
    result = run(
        "off_policy_distillation", overrides, backend="local", log_dir=tmp_path, max_steps=2
    )
    assert result.steps == 2
    assert len(scorers) == 2 * 4 and len(set(scorers)) == 2  # two teachers
    for step in (scorers[:4], scorers[4:]):
        assert sorted(step.count(s) for s in set(scorers)) == [2, 2]
    first = next(m for m in result.metrics if "composite/dataset_1_per_batch" in m)
    assert (first["composite/dataset_0_per_batch"], first["composite/dataset_1_per_batch"]) == (
        2,
        2,
    )


def test_a_streamed_dataset_trains_in_its_shuffle_buffers_order(tmp_path) -> None:
    """stream_shuffle_buffer: the batches are the store's seeded shuffle of the stream, on the
    fake backend (whose teacher answers top-K prompt logprobs)."""
    from kitchen.adapters.datasets import HFDatasetStore
    from kitchen.adapters.fake import FakeBackend
    from kitchen.adapters.fake.backend import FakeTrainingClient

    path = sharegpt_sums(tmp_path, 12, lambda i: f"{2 * i}")
    overrides = {
        "save_every": 0, "no_register": True, "batch_size": 2, "n_teacher_targets": 3,
        "dataset": str(path), "test_dataset": None, "stream_dataset": True, "max_prompts": 8,
        "stream_shuffle_buffer": 4, "seed": 5,
    }  # fmt: skip
    fake = FakeBackend()
    trained: list[str] = []
    original = FakeTrainingClient.forward_backward

    def recording(self, data, loss_fn, loss_fn_config=None):  # type: ignore[no-untyped-def]
        trained.extend(fake.tokenizer.decode(d.model_input.to_ints()) for d in data)
        return original(self, data, loss_fn, loss_fn_config)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FakeTrainingClient, "forward_backward", recording)
        result = run("off_policy_distillation", overrides, backend=fake, log_dir=tmp_path / "run")
    assert result.steps == 4
    stream = HFDatasetStore().stream(str(path), shuffle_buffer=4, seed=5)
    expected = [row["conversations"][0]["value"] for _, row in list(stream)[:8]]
    asked = [next(q for q in expected if q in text) for text in trained]
    assert asked == expected and expected != [f"What is {i} + {i}?" for i in range(8)]
