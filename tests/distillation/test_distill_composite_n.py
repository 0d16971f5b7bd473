"""distill_composite over N sources: extra sources after math and chat, each scored by its own
teacher, with its own share of the batch and its own teacher_kl/dataset_i."""

from __future__ import annotations

from kitchen.adapters.fake import FakeBackend
from kitchen.app.launch import run
from kitchen.app.resolve import get_recipe, resolve_config
from tests.distillation.test_distillation_fake import COMMON, record_teacher_inputs


def test_three_sources_each_scored_by_their_own_teacher(monkeypatch) -> None:
    fake = FakeBackend()
    scored = record_teacher_inputs(monkeypatch, fake)
    extra = {"dataset": "bundled:chat", "groups_per_batch": 3, "teacher_system_prompt": "THIRD TEACHER", "name": "pip"}  # fmt: skip
    overrides = {
        "num_batches": 2, "group_size": 2, "math_groups_per_batch": 1, "chat_groups_per_batch": 2,
        "math_teacher_system_prompt": "MATH TEACHER", "chat_teacher_system_prompt": "CHAT TEACHER",
        "extra_sources": [extra],
    }  # fmt: skip
    result = run("distill_composite", {**COMMON, **overrides}, backend=fake)
    counts = [
        sum(t in s for s in scored) for t in ("MATH TEACHER", "CHAT TEACHER", "THIRD TEACHER")
    ]
    assert counts == [2 * 1 * 2, 2 * 2 * 2, 2 * 3 * 2]  # steps x groups x group size
    step = next(m for m in result.metrics if "teacher_kl" in m)
    assert {"teacher_kl/dataset_0", "teacher_kl/dataset_1", "teacher_kl/dataset_2"} <= set(step)
    assert any(k.startswith("env/pip/") for k in step)


def test_extra_sources_come_from_the_command_line_as_json() -> None:
    arg = 'extra_sources=[{"dataset": "tulu3", "groups_per_batch": 8, "teacher_model": "Qwen/Qwen3-8B"}]'
    cfg = resolve_config(get_recipe("distill_composite"), args=[arg]).config
    [source] = cfg.extra_sources
    assert (source.dataset, source.groups_per_batch, source.teacher_model) == (
        "tulu3",
        8,
        "Qwen/Qwen3-8B",
    )
