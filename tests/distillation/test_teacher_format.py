"""Re-rendering a completion for a teacher with another chat format, and mapping the teacher's
logprobs back onto the student's action positions."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from kitchen.adapters.fake.tokenizer import FakeTokenizer
from kitchen.engine.errors import ConfigError
from kitchen.engine.stage import Context
from kitchen.workflows.distillation.stages import InitTeachers
from kitchen.workflows.distillation.state import DistillationState
from train_core.distillation import (
    Teacher,
    TeacherSpec,
    place_on_mask,
    same_tokenizer,
    split_turn_end,
    teacher_query,
)
from train_core.renderers import get_renderer

TOK = FakeTokenizer()
STUDENT = get_renderer("role_colon", TOK)
CHATML = get_renderer("chatml", TOK)


def chatml_teacher(system_prompt: str | None = None) -> Teacher:
    spec = TeacherSpec("teacher", renderer_name="chatml", system_prompt=system_prompt)
    return Teacher(spec, None, TOK, CHATML, same_format=False)


def action(text: str, end: str) -> SimpleNamespace:
    tokens = TOK.encode(text) + TOK.encode(end)
    return SimpleNamespace(tokens=tokens, logprobs=[-0.5] * len(tokens))


def test_a_role_colon_stop_string_is_swapped_for_the_teachers_turn_end():
    act = action("Yes. Happy cooking!", "\n\nUser:")
    query = teacher_query(chatml_teacher("Be Pip."), [{"role": "user", "content": "Hi?"}], act, STUDENT, TOK)  # fmt: skip
    text = TOK.decode(query.model_input.to_ints())
    assert text == (
        "<|im_start|>system\nBe Pip.<|im_end|>\n<|im_start|>user\nHi?<|im_end|>\n"
        "<|im_start|>assistant\nYes. Happy cooking!<|im_end|>"
    )
    n_stop = len(TOK.encode("\n\nUser:"))
    assert query.n_content == len(TOK.encode("Yes. Happy cooking!"))
    assert query.n_teacher_end == 1 and len(query.student_end_logprobs) == n_stop
    # Teacher logprobs: prompt positions, content positions (-1), the teacher's end token (-3).
    teacher_lp = [None] + [-9.0] * (query.prompt_len - 1) + [-1.0] * query.n_content + [-3.0]
    values = query.student_values(teacher_lp)
    assert values.tolist() == [-1.0] * query.n_content + [-3.0] + [-0.5] * (n_stop - 1)
    # Onto a datum whose first 4 positions are the prompt: only action positions get values.
    mask_T = np.array([0.0] * 4 + [1.0] * len(act.tokens))
    placed = place_on_mask(values, mask_T)
    assert placed[:4].tolist() == [0.0] * 4 and placed[4:].tolist() == values.tolist()


def test_a_completion_cut_by_max_tokens_gets_no_turn_end():
    act = SimpleNamespace(tokens=TOK.encode("Bake it at"), logprobs=[-0.1] * 10)
    assert split_turn_end(act.tokens, STUDENT.get_stop_sequences(), TOK) == 0
    query = teacher_query(chatml_teacher(), [{"role": "user", "content": "Hi?"}], act, STUDENT, TOK)
    assert TOK.decode(query.model_input.to_ints()).endswith("assistant\nBake it at")
    assert query.n_teacher_end == 0 and query.student_end_logprobs == []


def test_stop_token_and_eos_count_as_one_end_token():
    tokens = [*TOK.encode("ok"), TOK.eos_token_id]
    assert split_turn_end(tokens, CHATML.get_stop_sequences(), TOK) == 1
    assert split_turn_end(tokens, ["\n\nUser:"], TOK) == 1


def test_a_teacher_with_another_tokenizer_is_refused():
    other = SimpleNamespace(get_vocab=lambda: {"a": 0}, eos_token_id=0)
    assert same_tokenizer(TOK, TOK) and not same_tokenizer(
        SimpleNamespace(get_vocab=lambda: {"a": 1}), other
    )
    backend = SimpleNamespace(
        create_sampling_client=lambda **kw: SimpleNamespace(get_tokenizer=lambda: other)
    )
    state = DistillationState(tokenizer=TOK)
    spec = TeacherSpec("kitchen/tiny-qwen", renderer_name="chatml")
    stage = InitTeachers(specs=(spec,), student_renderer="chatml")
    with pytest.raises(ConfigError, match=r"teacher 0 .*different tokenizer"):
        stage(Context(state=state, backend=backend))  # type: ignore[arg-type]
