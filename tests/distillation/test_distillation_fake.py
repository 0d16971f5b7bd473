"""The distillation workflows end to end on the fake backend: the loss sent, on-policy samples,
no future left unawaited, each dataset scored by its own teacher, and the teacher scoring the
student's completion in the teacher's own chat format."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kitchen.adapters.fake import FakeBackend
from kitchen.adapters.fake.backend import FakeSamplingClient
from kitchen.app.launch import run

COMMON = {"save_every": 0, "no_register": True, "max_tokens": 64}


def record_teacher_inputs(monkeypatch: Any, fake: FakeBackend) -> list[str]:
    """The decoded text of every sequence any sampler scored with compute_logprobs."""
    seen: list[str] = []
    original = FakeSamplingClient.compute_logprobs

    def compute_logprobs(self: Any, prompt: Any) -> Any:
        seen.append(fake.tokenizer.decode(prompt.to_ints()))
        return original(self, prompt)

    monkeypatch.setattr(FakeSamplingClient, "compute_logprobs", compute_logprobs)
    return seen


def record_sampled_prompts(fake: FakeBackend) -> list[str]:
    prompts: list[str] = []

    def respond(tokens: list[int]) -> str:
        prompts.append(fake.tokenizer.decode(tokens))
        return "Bake it at 180 C. Happy cooking!"

    fake.responder = respond
    return prompts


@pytest.mark.parametrize("loss_fn", ["importance_sampling", "ppo"])
def test_on_policy_sends_the_configured_loss_and_samples_from_current_weights(loss_fn):
    fake = FakeBackend()
    overrides = {"num_batches": 3, "groups_per_batch": 2, "group_size": 2, "loss_fn": loss_fn}
    result = run("on_policy_distillation", {**COMMON, **overrides}, backend=fake)
    assert fake.loss_fns == [loss_fn] * 3
    assert fake.sample_policy_versions == [0] * 4 + [1] * 4 + [2] * 4
    assert fake.unawaited == 0
    assert result.steps == 3
    kls = [m["teacher_kl"] for m in result.metrics if "teacher_kl" in m]
    # The fake student's logprobs rise with each optim step while the teacher's stay put.
    assert len(kls) == 3 and kls[0] == pytest.approx(0.0) and kls[2] > kls[1] > kls[0]
    assert all("teacher_kl/dataset_0" in m for m in result.metrics if "teacher_kl" in m)


def test_teacher_scores_a_base_student_in_its_own_chat_format(monkeypatch):
    fake = FakeBackend()
    scored = record_teacher_inputs(monkeypatch, fake)
    sampled = record_sampled_prompts(fake)
    overrides = {
        "num_batches": 1, "groups_per_batch": 2, "group_size": 1,
        "renderer_name": "role_colon", "teacher_renderer_name": "chatml",
        "teacher_system_prompt": "You are Pip.",
    }  # fmt: skip
    result = run("on_policy_distillation", {**COMMON, **overrides}, backend=fake)
    assert fake.unawaited == 0 and result.steps == 1
    # The student saw its own (role-colon) format ...
    assert sampled and all(
        p.removeprefix("<|begin_of_text|>").startswith("User: ") and "<|im_start|>" not in p
        for p in sampled
    )
    # ... the teacher the same question and answer, re-rendered in ChatML under its system prompt.
    assert len(scored) == 2
    for text in scored:
        assert text.startswith("<|im_start|>system\nYou are Pip.<|im_end|>\n<|im_start|>user\n")
        assert "User:" not in text
        assert text.endswith("<|im_start|>assistant\nBake it at 180 C. Happy cooking!<|im_end|>")


def test_same_format_teacher_scores_the_student_sequence_as_is(monkeypatch):
    fake = FakeBackend()
    scored = record_teacher_inputs(monkeypatch, fake)
    sampled = record_sampled_prompts(fake)
    overrides = {"num_batches": 1, "groups_per_batch": 1, "group_size": 1}
    run(
        "on_policy_distillation",
        {**COMMON, **overrides, "teacher_system_prompt": None},
        backend=fake,
    )
    assert scored == [sampled[0] + "Bake it at 180 C. Happy cooking!<|im_end|>"]


def test_composite_scores_each_dataset_with_its_own_teacher(monkeypatch):
    fake = FakeBackend()
    scored = record_teacher_inputs(monkeypatch, fake)
    overrides = {
        "num_batches": 2, "group_size": 2, "math_groups_per_batch": 1, "chat_groups_per_batch": 2,
        "math_teacher_system_prompt": "MATH TEACHER", "chat_teacher_system_prompt": "CHAT TEACHER",
    }  # fmt: skip
    result = run("distill_composite", {**COMMON, **overrides}, backend=fake)
    assert fake.unawaited == 0 and fake.loss_fns == ["importance_sampling"] * 2
    math_scored = [s for s in scored if "MATH TEACHER" in s]
    chat_scored = [s for s in scored if "CHAT TEACHER" in s]
    assert len(math_scored) == 2 * 1 * 2 and len(chat_scored) == 2 * 2 * 2
    # Math questions (GSM8K-style) went to the math teacher only.
    assert all("?" in s for s in math_scored)
    step_metrics = [m for m in result.metrics if "teacher_kl" in m]
    assert {"teacher_kl/dataset_0", "teacher_kl/dataset_1"} <= set(step_metrics[0])


def test_prompt_distillation_labels_with_the_system_prompt_and_trains_without_it(tmp_path):
    fake = FakeBackend()
    sampled = record_sampled_prompts(fake)
    overrides = {
        "max_prompts": 8, "batch_size": 4, "num_epochs": 1, "teacher_system_prompt": "SECRET RULES",
        "eval_every": 1, "num_samples_to_show": 0, "save_every": 0, "no_register": True,
    }  # fmt: skip
    result = run("prompt_distillation", overrides, backend=fake, log_dir=tmp_path)
    assert fake.loss_fns == ["cross_entropy"] * 2 and fake.unawaited == 0
    teacher_prompts = [p for p in sampled if "SECRET RULES" in p]
    assert len(teacher_prompts) == 8 + 20  # train prompts + held-out prompts
    rows = [json.loads(line) for line in (tmp_path / "teacher_data.jsonl").read_text().splitlines()]
    assert len(rows) == 8
    assert all(r["messages"][1]["content"] == "Bake it at 180 C. Happy cooking!" for r in rows)
    assert "SECRET RULES" not in json.dumps(rows)
    assert (tmp_path / "teacher_data_test.jsonl").exists()
    assert "test/nll" in result.state.eval_results


def test_a_resumed_prompt_distillation_reuses_the_teacher_data(tmp_path):
    overrides = {
        "max_prompts": 8, "batch_size": 4, "num_epochs": 2, "test_dataset": None,
        "num_samples_to_show": 0, "save_every": 1, "no_register": True,
    }  # fmt: skip
    first = FakeBackend()
    run("prompt_distillation", overrides, backend=first, log_dir=tmp_path, max_steps=2)
    data = (tmp_path / "teacher_data.jsonl").read_text()
    again = FakeBackend(seed=5, states=first.states)  # another teacher would answer differently
    result = run(
        "prompt_distillation", overrides, backend=again, log_dir=tmp_path, if_exists="resume"
    )
    assert "sample" not in again.calls and result.steps == 4  # 2 + the 2 resumed
    assert (tmp_path / "teacher_data.jsonl").read_text() == data
