"""Teachers scoring the student's sampled tokens, each in its own chat format.

A teacher scores the student's sampled tokens in the teacher's own chat format (tinker-cookbook
issue 796): when its renderer or system prompt differs from the student's, the prompt is
re-rendered as the teacher would see it, the student's completion tokens are appended (the turn-end
marker swapped for the teacher's), and the teacher's logprobs of those tokens are placed back on the
student's action positions (`place_on_mask`). The teacher must share the student's tokenizer: its
logprobs are of the student's own token ids. Cross-tokenizer alignment is refused, not guessed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tinker import types

from train_core.distillation.advantages import place_on_mask
from train_core.futures import resolve_future
from train_core.scoring import full_sequence, num_targets, target_logprobs


@dataclass(frozen=True)
class TeacherSpec:
    """Which teacher: a base model or a saved sampler checkpoint, its chat format, and the system
    prompt it answers under (None = none)."""

    model: str
    checkpoint: str | None = None
    renderer_name: str | None = None
    system_prompt: str | None = None


@dataclass
class Teacher:
    """A live teacher: its sampler, tokenizer and renderer; `same_format` when it would render
    the student's prompt token for token as the student did (then it scores the datum as is)."""

    spec: TeacherSpec
    client: Any
    tokenizer: Any
    renderer: Any
    same_format: bool


def same_tokenizer(a: Any, b: Any) -> bool:
    """Same vocabulary (token string -> id), or the same object."""
    if a is b:
        return True
    vocab_a, vocab_b = getattr(a, "get_vocab", None), getattr(b, "get_vocab", None)
    if vocab_a is not None and vocab_b is not None:
        return bool(vocab_a() == vocab_b())
    probe = "Teacher and student: 180 °C (356 °F), 1,000 g!"
    return bool(len(a) == len(b) and a.encode(probe) == b.encode(probe))


def split_turn_end(tokens: Sequence[int], stop: Sequence[Any], tokenizer: Any) -> int:
    """How many trailing tokens of a completion are its turn-end marker (a stop token, a stop
    string, or EOS); 0 when it was cut by max_tokens."""
    if not tokens:
        return 0
    if tokens[-1] in [s for s in stop if isinstance(s, int)] + [tokenizer.eos_token_id]:
        return 1
    for n in range(1, min(len(tokens), 16) + 1):
        tail = str(tokenizer.decode(list(tokens[-n:])))
        if any(isinstance(s, str) and s and s in tail for s in stop):
            return n
    return 0


def turn_end_tokens(renderer: Any, tokenizer: Any) -> list[int]:
    """The tokens that end an assistant turn in `renderer`'s format (its first stop sequence)."""
    stop = renderer.get_stop_sequences()
    if not stop:
        return [tokenizer.eos_token_id]
    first = stop[0]
    return [first] if isinstance(first, int) else list(tokenizer.encode(first))


def teacher_messages(teacher: Teacher, prompt_messages: list[Any]) -> list[Any]:
    """The conversation as the teacher sees it: under its own system prompt, when it has one."""
    if not teacher.spec.system_prompt:
        return list(prompt_messages)
    rest = [m for m in prompt_messages if m.get("role") != "system"]
    return [{"role": "system", "content": teacher.spec.system_prompt}, *rest]


@dataclass(frozen=True)
class TeacherQuery:
    """A completion re-rendered for the teacher, and how to map its logprobs back."""

    model_input: types.ModelInput
    prompt_len: int
    n_content: int
    n_teacher_end: int
    student_end_logprobs: list[float]

    def student_values(self, teacher_logprobs: Sequence[float | None]) -> np.ndarray:
        """The teacher's logprob of each student completion token, in order. Turn ends of equal
        length map one to one; otherwise the first student end token gets the teacher's whole
        end logprob and the rest keep the student's own (no signal on format tokens)."""
        lp = np.asarray([np.nan if v is None else v for v in teacher_logprobs], dtype=np.float64)
        start, end = self.prompt_len, self.prompt_len + self.n_content
        content = lp[start:end]
        teacher_end = lp[end : end + self.n_teacher_end]
        n_student_end = len(self.student_end_logprobs)
        if n_student_end == 0:
            ends = np.zeros(0)
        elif n_student_end == self.n_teacher_end:
            ends = teacher_end
        else:
            ends = np.asarray([teacher_end.sum(), *self.student_end_logprobs[1:]])
        return np.concatenate([content, ends])


def teacher_query(
    teacher: Teacher,
    prompt_messages: list[Any],
    action: Any,
    student_renderer: Any,
    student_tokenizer: Any,
) -> TeacherQuery:
    """The student's completion `action` of `prompt_messages`, as the teacher would see it."""
    tokens, logprobs = list(action.tokens), list(action.logprobs)
    n_end = split_turn_end(tokens, student_renderer.get_stop_sequences(), student_tokenizer)
    content = tokens[: len(tokens) - n_end]
    prompt = teacher.renderer.build_generation_prompt(teacher_messages(teacher, prompt_messages))
    end = turn_end_tokens(teacher.renderer, teacher.tokenizer) if n_end else []
    return TeacherQuery(
        model_input=types.ModelInput.from_ints([*prompt.to_ints(), *content, *end]),
        prompt_len=prompt.length,
        n_content=len(content),
        n_teacher_end=len(end),
        student_end_logprobs=[float(x) for x in logprobs[len(content) :]],
    )


async def score_with_teachers(
    data_D: Sequence[types.Datum],
    meta_D: Sequence[dict[str, int]],
    groups_P: Sequence[Any],
    builders_P: Sequence[Any],
    teachers: Sequence[Teacher],
    student_renderer: Any,
    student_tokenizer: Any,
) -> tuple[list[np.ndarray], list[int]]:
    """(teacher_logprobs_D, teacher_D): per datum of `assemble_training_data`, its teacher's
    logprob of each target position, and which teacher (its group builder's `dataset_idx`).
    A teacher in the student's format scores the datum as is; another format needs single-turn
    envs whose group builder has `prompt_messages`. All requests are sent before any is awaited."""
    tags_D: list[int] = []
    queries_D: list[TeacherQuery | None] = []  # None: the teacher scores the datum as is
    futures = []
    for datum, meta in zip(data_D, meta_D, strict=True):
        builder = builders_P[meta["group_idx"]]
        tag = int(getattr(builder, "dataset_idx", 0))
        teacher = teachers[tag]
        tags_D.append(tag)
        if teacher.same_format:
            queries_D.append(None)
            futures.append(teacher.client.compute_logprobs(full_sequence(datum)))
            continue
        traj = groups_P[meta["group_idx"]].trajectories_G[meta["traj_idx"]]
        messages = getattr(builder, "prompt_messages", None)
        if messages is None or len(traj.transitions) != 1:
            raise ValueError(
                f"teacher {tag} uses another chat format than the student, which needs "
                "single-turn envs whose group builder has `prompt_messages`; "
                f"{type(builder).__name__} has none (or the episode is multi-turn)"
            )
        query = teacher_query(
            teacher, messages, traj.transitions[0].ac, student_renderer, student_tokenizer
        )
        queries_D.append(query)
        futures.append(teacher.client.compute_logprobs(query.model_input))
    scored_D = await asyncio.gather(*(resolve_future(f) for f in futures))
    teacher_lp_D = [
        target_logprobs(lp, num_targets(d))
        if q is None
        else place_on_mask(q.student_values(lp), d.loss_fn_inputs["mask"])
        for q, lp, d in zip(queries_D, scored_D, data_D, strict=True)
    ]
    return teacher_lp_D, tags_D


async def teacher_conversations(
    teacher: Teacher, prompts: Sequence[str], max_tokens: int, temperature: float
) -> list[dict[str, Any]]:
    """Prompt distillation's create-data: the teacher answers each prompt under its system
    prompt; each conversation keeps the prompt and the answer, not the system prompt (what the
    student learns from). Empty answers are dropped. All requests are sent before any is awaited."""
    from train_core.renderers.content import get_text_content

    params = types.SamplingParams(
        max_tokens=max_tokens, temperature=temperature, stop=teacher.renderer.get_stop_sequences()
    )
    futures = [
        teacher.client.sample(
            teacher.renderer.build_generation_prompt(
                teacher_messages(teacher, [{"role": "user", "content": p}])
            ),
            1,
            params,
        )
        for p in prompts
    ]
    responses = await asyncio.gather(*(resolve_future(f) for f in futures))
    rows = []
    for prompt, response in zip(prompts, responses, strict=True):
        message, _ = teacher.renderer.parse_response(response.sequences[0].tokens)
        answer = get_text_content(message).strip()
        if answer:
            user = {"role": "user", "content": prompt}
            rows.append({"messages": [user, {"role": "assistant", "content": answer}]})
    return rows
