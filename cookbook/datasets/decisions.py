"""Decisions (tinker-cookbook 0.6.1's decisions recipe): a question with an ordered list of
(label, description) choices, rendered so that one answer token picks a choice.

The conversation is a system message giving the answer format (`choice#?`), a user message with
the question and the choices (`choice#A: description`, ...), and the assistant reply `choice#?`,
cut after its placeholder: the model's logprobs of the choice ids (`A`, `B`, ...) at the
placeholder, softmaxed over the choices, are the decision's probabilities. Training datums put
the label's id at the placeholder (hard labels: cross entropy on that one token) or the ids of
every choice there with their target probabilities (soft labels: a loss on the choice
distribution, `choice_probability_loss`).

Rows: {"question", "choices": [[label, description], ...], "answer": label, "probs":
{label: p}}; "probs" is optional (soft labels use it; hard labels use "answer").
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tinker import types

from kitchen.engine.errors import DataError

CHOICE_IDS = string.ascii_uppercase
SYSTEM_PROMPT = (
    "Answer the user's question by picking exactly one of the choices they supply. Reply with "
    "the id of your choice, written as `{answer_format}`, and nothing else."
)
USER_PROMPT = "{question}\n\nChoices (your answer must be exactly one of these):\n{choices}"


@dataclass(frozen=True)
class Decision:
    """A question, its ordered (label, description) choices, the correct label and, optionally,
    target probabilities by label."""

    question: str
    choices: tuple[tuple[str, str], ...]
    answer: str
    probs: Mapping[str, float] | None = None

    @property
    def labels(self) -> list[str]:
        return [label for label, _ in self.choices]


def decision_row(row: dict[str, Any], where: str) -> dict[str, Any]:
    """A dataset row checked as a decision (LoadDataset's converter): DataError naming the row."""
    choices = row.get("choices")
    if not isinstance(row.get("question"), str) or not isinstance(choices, list):
        raise DataError(f"{where}: expected a 'question' string and a 'choices' list")
    labels = [c[0] if isinstance(c, list | tuple) else c for c in choices]
    if len(labels) < 2 or len(set(labels)) != len(labels) or len(labels) > len(CHOICE_IDS):
        raise DataError(f"{where}: choices {labels} must be 2 to 26 distinct labels")
    if row.get("answer") not in labels:
        raise DataError(f"{where}: answer {row.get('answer')!r} is not one of {labels}")
    probs = row.get("probs")
    if probs is not None:
        if set(probs) - set(labels) or any(p < 0 for p in probs.values()):
            raise DataError(f"{where}: probs {probs} must be >= 0 and keyed by {labels}")
        if not math.isclose(sum(probs.values()), 1.0, abs_tol=1e-6):
            raise DataError(f"{where}: probs sum to {sum(probs.values())}; expected 1")
    return {
        "question": row["question"],
        "choices": [
            [c[0], c[1] if len(c) > 1 else ""] if isinstance(c, list | tuple) else [c, ""]
            for c in choices
        ],
        "answer": row["answer"],
        "probs": probs,
    }


def as_decision(item: dict[str, Any]) -> Decision:
    return Decision(
        item["question"],
        tuple((str(label), str(text)) for label, text in item["choices"]),
        item["answer"],
        item.get("probs"),
    )


@dataclass(frozen=True)
class Rendering:
    """A rendered decision: `tokens` end at the placeholder, at `choice_pos`; `label_tokens` is
    the id token that picks each label, in choice order."""

    tokens: list[int]
    choice_pos: int
    label_tokens: dict[str, int]

    def with_label(self, label: str) -> list[int]:
        tokens = list(self.tokens)
        tokens[self.choice_pos] = self.label_tokens[label]
        return tokens


def render_decision(
    decision: Decision, renderer: Any, prefix: str = "choice#", placeholder: str = "?"
) -> Rendering:
    """`decision` through the chat `renderer`, cut after the placeholder of the answer
    `prefix + placeholder`; DataError when an id or the placeholder is not one token after the
    prefix on this tokenizer, or the template tokenizes the reply otherwise."""
    tokenizer = renderer.tokenizer

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False))

    head = encode(prefix)
    answer = encode(prefix + placeholder)
    label_tokens: dict[str, int] = {}
    for label, cid in zip(decision.labels, CHOICE_IDS, strict=False):
        ids = encode(prefix + cid)
        if ids[: len(head)] != head or len(ids) != len(head) + 1:
            raise DataError(
                f"decisions: choice id {cid!r} is not one token after the prefix {prefix!r} on "
                f"this tokenizer ({ids}); pick a prefix that ends at a token boundary"
            )
        label_tokens[label] = ids[-1]
    if answer[: len(head)] != head or len(answer) != len(head) + 1:
        raise DataError(f"decisions: placeholder {placeholder!r} is not one token after {prefix!r}")
    lines = []
    for (label, text), cid in zip(decision.choices, CHOICE_IDS, strict=False):
        line = f"{prefix}{cid}" + ("" if cid == label else f' = "{label}"')
        lines.append(f"{line}: {text}" if text else line)
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT.format(answer_format=prefix + placeholder)},
        {
            "role": "user",
            "content": USER_PROMPT.format(question=decision.question, choices="\n".join(lines)),
        },
        {"role": "assistant", "content": prefix + placeholder},
    ]
    model_input, _ = renderer.build_supervised_example(messages)
    tokens = model_input.to_ints()
    n = len(answer)
    start = next((i for i in range(len(tokens) - n, -1, -1) if tokens[i : i + n] == answer), None)
    if start is None:
        raise DataError(
            f"decisions: the reply tokens {answer} are not in the rendered conversation; the "
            "chat template tokenizes the reply differently"
        )
    choice_pos = start + len(head)
    return Rendering(tokens[: choice_pos + 1], choice_pos, label_tokens)


def hard_label_datum(rendering: Rendering, label: str) -> types.Datum:
    """Cross entropy on the label's id at the placeholder, and on nothing else."""
    tokens = rendering.with_label(label)
    weights_T = np.zeros(len(tokens) - 1, dtype=np.float32)
    weights_T[rendering.choice_pos - 1] = 1.0  # target t is token t + 1
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": types.TensorData.from_numpy(np.asarray(tokens[1:], dtype=np.int64)),
            "weights": types.TensorData.from_numpy(weights_T),
        },
    )


def soft_label_datum(
    rendering: Rendering, probs: Mapping[str, float], width: int | None = None
) -> types.Datum:
    """Every choice's id at the placeholder, as [T, K] targets whose last row is the ids and
    whose last row of weights is their target probabilities (the cookbook's layout): the input
    stops before the placeholder. `width` pads K (a batch's datums share one target shape)
    with repeats of the first id at weight 0; the loss stops at the first repeated id."""
    labels = list(rendering.label_tokens)
    K = len(labels)
    W = K if width is None else width
    if W < K:
        raise DataError(f"decisions: width {W} is less than the {K} choices")
    ids = [rendering.label_tokens[label] for label in labels]
    T = rendering.choice_pos
    targets_TK = np.zeros((T, W), dtype=np.int64)
    targets_TK[-1] = ids + [ids[0]] * (W - K)
    weights_TK = np.zeros((T, W), dtype=np.float32)
    weights_TK[-1, :K] = [probs.get(label, 0.0) for label in labels]
    return types.Datum(
        model_input=types.ModelInput.from_ints(rendering.tokens[:T]),
        loss_fn_inputs={
            "target_tokens": types.TensorData.from_numpy(targets_TK),
            "weights": types.TensorData.from_numpy(weights_TK),
        },
    )


def target_request(rendering: Rendering) -> types.TensorData:
    """SampleRequest.target_prompt_logprobs asking for every choice's id at the placeholder
    (row i scores prompt position i + 1), sparse: one row of K cells."""
    import torch

    ids_RK = torch.full((len(rendering.tokens) - 1, len(rendering.label_tokens)), -1)
    ids_RK[rendering.choice_pos - 1] = torch.tensor(list(rendering.label_tokens.values()))
    return types.TensorData.from_torch_sparse(ids_RK, pad_value=-1)


def choice_count(ids_W: Any) -> int:
    """The choices in a soft-label datum's id row: up to the first repeated id (the padding)."""
    seen: set[int] = set()
    for k, token in enumerate(int(t) for t in ids_W):
        if token in seen:
            return k
        seen.add(token)
    return len(seen)


def brier(choice_probs_K: Any, target_probs_K: Any) -> Any:
    """The Brier score of a distribution against the target's: sum_k (p_k - q_k)^2."""
    return ((choice_probs_K - target_probs_K) ** 2).sum()


def cross_entropy(choice_probs_K: Any, target_probs_K: Any) -> Any:
    """-sum_k q_k log p_k over the choices (p renormalised over them)."""
    import torch

    return -(target_probs_K * torch.log(choice_probs_K.clamp_min(1e-12))).sum()


PROBABILITY_LOSSES: dict[str, Callable[[Any, Any], Any]] = {
    "brier": brier,
    "cross_entropy": cross_entropy,
}


def choice_probability_loss(
    loss_of: Callable[[Any, Any], Any],
) -> Callable[[list[types.Datum], list[Any]], tuple[Any, dict[str, float]]]:
    """A forward_backward_custom loss: the mean over datums of `loss_of(p_K, q_K)`, p the
    softmax of the choices' logprobs at the placeholder, q the datum's target probabilities.
    Metrics: loss, target_prob:mean (sum_k p_k q_k) and accuracy (argmax agreement)."""
    import torch

    def loss(data: Sequence[types.Datum], logprobs: Sequence[Any]) -> tuple[Any, dict[str, float]]:
        losses, agree, hits = [], [], 0
        for datum, logprobs_TK in zip(data, logprobs, strict=True):
            k = choice_count(datum.loss_fn_inputs["target_tokens"].to_numpy()[-1])
            target_K = datum.loss_fn_inputs["weights"].to_torch()[-1, :k].float()
            probs_K = torch.softmax(logprobs_TK[-1, :k].float(), dim=-1)
            losses.append(loss_of(probs_K, target_K))
            agree.append(float((probs_K * target_K).sum().detach()))
            hits += int(probs_K.argmax() == target_K.argmax())
        total = torch.stack(losses).mean()
        return total, {
            "loss": float(total.item()),
            "target_prob:mean": sum(agree) / len(agree),
            "accuracy": hits / len(data),
        }

    return loss
