"""Conversation -> training Datum: next-token shift, loss weights aligned to targets, truncation.

Numerics and formats follow tinker-cookbook 0.6.1 (`supervised/common.py`, `supervised/data.py`):
the model sees tokens[:-1], predicts tokens[1:], and weights[1:] say which predictions count.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt
from tinker import types

from train_core.renderers.types import Message

Reduction = Literal["none", "mean"]
ALL_ASSISTANT_MESSAGES = "all_assistant_messages"  # TrainOnWhat.ALL_ASSISTANT_MESSAGES's value


class SupervisedRenderer(Protocol):
    """The one renderer method this module needs (train_core.renderers.Renderer satisfies it)."""

    def build_supervised_example(
        self, messages: list[Message], train_on_what: Any = ...
    ) -> tuple[types.ModelInput, Any]: ...


def _truncate_chunks(
    chunks: list[types.ModelInputChunk], max_length: int
) -> list[types.ModelInputChunk]:
    """Drop tokens from the right until the sequence fits; a non-text chunk leaves whole."""
    chunks = list(chunks)
    total = sum(chunk.length for chunk in chunks)
    while total > max_length and chunks:
        last = chunks[-1]
        overflow = total - max_length
        if isinstance(last, types.EncodedTextChunk) and overflow < last.length:
            chunks[-1] = types.EncodedTextChunk(tokens=list(last.tokens[:-overflow]))
            total = max_length
        else:
            chunks.pop()
            total -= last.length
    return chunks


def shift_chunks(chunks: Sequence[types.ModelInputChunk]) -> tuple[types.ModelInput, list[int]]:
    """Right-shifted inputs (all but the last token) and left-shifted targets (all but the first).

    Non-text positions (images) appear in the targets as token 0; they carry no weight.
    """
    if not chunks or not isinstance(chunks[-1], types.EncodedTextChunk):
        raise ValueError("datum: the last chunk must be text (trailing images are dropped first)")
    total = sum(chunk.length for chunk in chunks)
    if total < 2:
        raise ValueError(f"datum: need at least 2 tokens to form an input/target pair, got {total}")
    last = chunks[-1]
    input_chunks = list(chunks[:-1])
    if last.length > 1:
        input_chunks.append(types.EncodedTextChunk(tokens=list(last.tokens[:-1])))
    all_tokens: list[int] = []
    for chunk in chunks:
        if isinstance(chunk, types.EncodedTextChunk):
            all_tokens.extend(int(t) for t in chunk.tokens)
        else:
            all_tokens.extend([0] * chunk.length)
    return types.ModelInput(chunks=input_chunks), all_tokens[1:]


def datum_from_model_input_weights(
    model_input: types.ModelInput,
    weights: Any,
    max_length: int | None = None,
    reduction: Reduction = "none",
) -> types.Datum:
    """A cross-entropy Datum from a full token sequence and its per-token weights.

    `weights` (numpy, list or torch tensor) is aligned with `model_input` positions. The sequence is
    truncated from the right to `max_length` tokens (before the shift, as 0.6.1 does), so the datum
    holds at most `max_length - 1` input tokens. `reduction="mean"` rescales the kept weights to sum
    to 1 per example (token-mean loss); "none" keeps them (token-sum loss, what DPO needs).
    """
    weights_T = np.asarray(weights, dtype=np.float32).reshape(-1)
    if weights_T.shape[0] != model_input.length:
        raise ValueError(
            f"datum: weights have {weights_T.shape[0]} entries but model_input has "
            f"{model_input.length} tokens; expected one weight per token"
        )
    if reduction not in ("none", "mean"):
        raise ValueError(f"datum: unknown reduction {reduction!r}; expected 'none' or 'mean'")
    chunks = list(model_input.chunks)
    if max_length is not None:
        chunks = _truncate_chunks(chunks, max_length)
    # An empty text chunk (a header for an empty message) would stop the shift from dropping the
    # last real token; a trailing image has nothing after it to predict.
    chunks = [c for c in chunks if not (isinstance(c, types.EncodedTextChunk) and c.length == 0)]
    while chunks and not isinstance(chunks[-1], types.EncodedTextChunk):
        chunks.pop()
    shifted_input, targets = shift_chunks(chunks)
    target_weights_T = weights_T[1 : len(targets) + 1].copy()
    if reduction == "mean":
        total = float(target_weights_T.sum())
        if total > 0:
            target_weights_T = target_weights_T / total
    return types.Datum(
        model_input=shifted_input,
        loss_fn_inputs={
            "weights": types.TensorData(
                data=target_weights_T, dtype="float32", shape=[len(target_weights_T)]
            ),
            "target_tokens": types.TensorData(data=targets, dtype="int64", shape=[len(targets)]),
        },
    )


def coerce_train_on_what(value: Any) -> Any:
    """A TrainOnWhat member from its string value when train_core.renderers is importable."""
    try:
        from train_core.renderers import TrainOnWhat  # type: ignore[attr-defined]
    except ImportError:
        return value
    return TrainOnWhat(value)


def build_example(
    renderer: SupervisedRenderer, messages: list[Message], train_on_what: Any = None
) -> tuple[types.ModelInput, Any]:
    """renderer.build_supervised_example; `train_on_what=None` keeps the renderer's own default."""
    if train_on_what is None:
        return renderer.build_supervised_example(messages)
    return renderer.build_supervised_example(
        messages, train_on_what=coerce_train_on_what(train_on_what)
    )


def conversation_to_datum(
    messages: list[Message],
    renderer: SupervisedRenderer,
    max_length: int | None,
    train_on_what: Any = ALL_ASSISTANT_MESSAGES,
    reduction: Reduction = "mean",
) -> types.Datum:
    """Render a conversation and turn it into a cross-entropy Datum.

    Defaults as 0.6.1's `conversation_to_datum`: train on all assistant messages, reduction "mean"
    (weights sum to 1 per example). `train_on_what=None` uses the renderer's own default.
    """
    model_input, weights = build_example(renderer, messages, train_on_what)
    return datum_from_model_input_weights(model_input, weights, max_length, reduction=reduction)


def datum_weights(datum: types.Datum) -> npt.NDArray[np.float32]:
    """The datum's per-target loss weights as float32 numpy."""
    return np.asarray(datum.loss_fn_inputs["weights"].to_numpy(), dtype=np.float32).reshape(-1)
