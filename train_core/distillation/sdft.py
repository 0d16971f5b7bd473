"""Self-distillation fine-tuning (SDFT, Shenfeld et al. 2026, as tinker-cookbook 0.6.1's
distillation/sdft.py): the model is its own teacher. The student answers a question; its frozen
base, shown the same question with a golden answer as an in-context demonstration, reads the
student's answer, and the student is trained towards the teacher's top-K distribution at each of
its tokens (train_core.distillation.topk).

The held-out counterpart here reads the golden answer itself as the completion: a fixed,
deterministic teacher-student cross-entropy on test demonstrations (no sampling)."""

from __future__ import annotations

from typing import Any

import numpy as np
from tinker import types

DEFAULT_DEMO_TEMPLATE = (
    "{question}\n\n"
    "This is an example for a response to the question:\n"
    "{golden_answer}\n\n"
    "Now answer with a response of your own, including the thinking process."
)


def sdft_teacher_prompt(
    question: str,
    golden_answer: str,
    renderer: Any,
    system_prompt: str | None = None,
    demo_template: str = DEFAULT_DEMO_TEMPLATE,
) -> types.ModelInput:
    """The teacher's generation prompt: the question with the golden answer as a demonstration
    (`demo_template`), under `system_prompt` when one is given."""
    messages: list[dict[str, str]] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    content = demo_template.format(question=question, golden_answer=golden_answer)
    messages.append({"role": "user", "content": content})
    return renderer.build_generation_prompt(messages)


def demonstration_datum(question: str, answer: str, renderer: Any) -> types.Datum:
    """The student's view of a demonstration as an RL datum: the conversation (question, then
    `answer` as the assistant's turn) with `mask` 1 on the answer's targets, what
    `teacher_forcing` reads as the completion."""
    messages: Any = [
        {"role": "user", "content": question},
        {"role": "assistant", "content": answer},
    ]
    tokens, weights = renderer.build_supervised_example(messages)
    full = tokens.to_ints()
    return types.Datum(
        model_input=types.ModelInput.from_ints(full[:-1]),
        loss_fn_inputs={
            "target_tokens": types.TensorData.from_numpy(np.asarray(full[1:], dtype=np.int64)),
            "mask": types.TensorData.from_numpy(np.asarray(weights[1:], dtype=np.float32)),
        },
    )
