"""Every TrainOnWhat value weights exactly the tokens it names (headers only with ALL_TOKENS)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.renderers.harness import CONVERSATIONS, weighted_spans
from train_core.renderers import Message, RendererError, TrainOnWhat, get_renderer

# The golden "customized" conversation flags its trainable messages; the other modes get it unflagged.
CUSTOMIZED: list[Message] = CONVERSATIONS["customized"]  # type: ignore[assignment]
CONVERSATION = [Message(role=m["role"], content=m["content"]) for m in CUSTOMIZED]

END = "<|im_end|>"
EXPECTED_CHATML: dict[TrainOnWhat, list[str]] = {
    TrainOnWhat.LAST_ASSISTANT_MESSAGE: [f"4{END}"],
    TrainOnWhat.LAST_ASSISTANT_TURN: [f"4{END}"],
    TrainOnWhat.ALL_ASSISTANT_MESSAGES: [f"Hello!{END}", f"4{END}"],
    TrainOnWhat.ALL_MESSAGES: [
        f"Be brief.{END}",
        f"Hello there!{END}",
        f"Hello!{END}",
        f"What is 2+2?{END}",
        f"4{END}",
    ],
    TrainOnWhat.ALL_USER_AND_SYSTEM_MESSAGES: [
        f"Be brief.{END}",
        f"Hello there!{END}",
        f"What is 2+2?{END}",
    ],
    TrainOnWhat.CUSTOMIZED: [f"Hello there!{END}", f"4{END}"],
}


def _messages(train_on_what: TrainOnWhat) -> list[Message]:
    return CUSTOMIZED if train_on_what == TrainOnWhat.CUSTOMIZED else CONVERSATION


@pytest.mark.parametrize("train_on_what", list(EXPECTED_CHATML))
def test_chatml_weights_the_named_messages(test_tokenizer: Any, train_on_what: TrainOnWhat) -> None:
    renderer = get_renderer("chatml", test_tokenizer)
    model_input, weights = renderer.build_supervised_example(
        _messages(train_on_what), train_on_what=train_on_what
    )
    assert weights.dtype == np.float32
    spans = weighted_spans(test_tokenizer, model_input.to_ints(), weights)
    assert spans == EXPECTED_CHATML[train_on_what]


@pytest.mark.parametrize("name", ["chatml", "llama3", "qwen3", "kimi_k2", "gpt_oss_no_sysprompt"])
def test_all_tokens_trains_every_token_and_the_same_sequence(
    test_tokenizer: Any, name: str
) -> None:
    renderer = get_renderer(name, test_tokenizer)
    last_only, _ = renderer.build_supervised_example(CONVERSATION)
    model_input, weights = renderer.build_supervised_example(
        CONVERSATION, train_on_what=TrainOnWhat.ALL_TOKENS
    )
    assert model_input.to_ints() == last_only.to_ints()
    bos = len(renderer._bos_tokens)  # BOS is never trained
    assert weights[bos:].all() and not weights[:bos].any()


def test_train_on_what_accepts_its_string_values(test_tokenizer: Any) -> None:
    renderer = get_renderer("chatml", test_tokenizer)
    _, by_enum = renderer.build_supervised_example(CONVERSATION, TrainOnWhat.ALL_ASSISTANT_MESSAGES)
    _, by_str = renderer.build_supervised_example(CONVERSATION, "all_assistant_messages")  # type: ignore[arg-type]
    np.testing.assert_array_equal(by_enum, by_str)


def test_customized_needs_trainable_on_every_message_and_others_refuse_it(
    test_tokenizer: Any,
) -> None:
    renderer = get_renderer("chatml", test_tokenizer)
    with pytest.raises(RendererError, match="has no 'trainable' field"):
        renderer.build_supervised_example(CONVERSATION, TrainOnWhat.CUSTOMIZED)
    with pytest.raises(RendererError, match="only train_on_what=customized reads"):
        renderer.build_supervised_example(_messages(TrainOnWhat.CUSTOMIZED))


def test_last_assistant_turn_spans_the_tool_exchange(test_tokenizer: Any) -> None:
    from train_core.renderers import ToolCall

    call = ToolCall(function=ToolCall.FunctionBody(name="add", arguments='{"a": 2, "b": 2}'))
    messages: list[Message] = [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "4", "name": "add"},
        {"role": "assistant", "content": "4"},
    ]
    renderer = get_renderer("chatml", test_tokenizer)
    model_input, weights = renderer.build_supervised_example(
        messages, TrainOnWhat.LAST_ASSISTANT_TURN
    )
    spans = weighted_spans(test_tokenizer, model_input.to_ints(), weights)
    assert spans == [
        '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 2}}\n</tool_call><|im_end|>',
        "4<|im_end|>",
    ]


def test_history_rewriting_renderer_splits_examples_per_reply(test_tokenizer: Any) -> None:
    """qwen3 drops earlier reasoning, so each reply trains in its own example, on its own prompt."""
    renderer = get_renderer("qwen3", test_tokenizer)
    messages: list[Message] = [
        {"role": "user", "content": "What is 2+2?"},
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "Add."}, {"type": "text", "text": "4"}],
        },
        {"role": "user", "content": "And 3+3?"},
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "Add."}, {"type": "text", "text": "6"}],
        },
    ]
    examples = renderer.build_supervised_examples(messages, TrainOnWhat.ALL_ASSISTANT_MESSAGES)
    assert len(examples) == 2
    for (model_input, weights), reply in zip(examples, ["4", "6"], strict=True):
        spans = weighted_spans(test_tokenizer, model_input.to_ints(), weights)
        assert spans == [f"<think>\nAdd.\n</think>\n\n{reply}<|im_end|>"]
    # The chatml format keeps history as is, so one example trains both replies.
    assert len(get_renderer("chatml", test_tokenizer).build_supervised_examples(messages)) == 1
