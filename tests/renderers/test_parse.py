"""parse_response inverts rendering: a rendered reply parses back to the message it came from."""

from __future__ import annotations

from typing import Any

import pytest

from tests.renderers.harness import CORE_RENDERER_NAMES
from train_core.renderers import (
    Message,
    ParseTermination,
    Renderer,
    RendererError,
    ToolCall,
    get_renderer,
    get_text_content,
)

QUESTION: Message = {"role": "user", "content": "What is the weather in Paris?"}
CALL = ToolCall(
    function=ToolCall.FunctionBody(name="get_weather", arguments='{"city": "Paris"}'),
    id="functions.get_weather:0",
)
PLAIN: Message = {"role": "assistant", "content": "It is sunny."}
REASONED: Message = {
    "role": "assistant",
    "content": [
        {"type": "thinking", "thinking": "I should look it up."},
        {"type": "text", "text": "It is sunny."},
    ],
}
CALLING: Message = {"role": "assistant", "content": "Let me check.", "tool_calls": [CALL]}


def _sampled(renderer: Renderer, reply: Message) -> list[int]:
    """The tokens a model would sample for `reply`: its render after the generation prompt."""
    full, _ = renderer.build_supervised_example([QUESTION, reply])
    prompt = renderer.build_generation_prompt([QUESTION]).to_ints()
    assert full.to_ints()[: len(prompt)] == prompt
    return full.to_ints()[len(prompt) :]


def _normalized(message: Message) -> Message:
    """Content as a string when it is text only (formats that always write a think block parse a
    plain reply as a one-part list)."""
    content = message["content"]
    if isinstance(content, list) and all(p["type"] == "text" for p in content):
        return {**message, "content": "".join(p["text"] for p in content)}  # type: ignore[typeddict-item]
    return message


def _round_trip(tokenizer: Any, name: str, reply: Message) -> Message:
    renderer = get_renderer(name, tokenizer)
    message, termination = renderer.parse_response(_sampled(renderer, reply))
    assert termination == ParseTermination.STOP_SEQUENCE
    assert termination.is_clean and termination.is_stop_sequence
    return _normalized(message)


ALL = [*CORE_RENDERER_NAMES, "chatml", "chatml_smollm2"]
THINKING = ["qwen3", "deepseekv3_thinking", "kimi_k2", "gpt_oss_no_sysprompt", "chatml"]
TOOLS = ["qwen3", "qwen3_instruct", "deepseekv3", "kimi_k2", "gpt_oss_no_sysprompt", "chatml"]


@pytest.mark.parametrize("name", ALL)
def test_plain_reply_round_trips(test_tokenizer: Any, name: str) -> None:
    assert _round_trip(test_tokenizer, name, PLAIN) == PLAIN


@pytest.mark.parametrize("name", THINKING)
def test_reasoning_round_trips_as_thinking_part(test_tokenizer: Any, name: str) -> None:
    assert _round_trip(test_tokenizer, name, REASONED) == REASONED


@pytest.mark.parametrize("name", TOOLS)
def test_tool_calls_round_trip(test_tokenizer: Any, name: str) -> None:
    message = _round_trip(test_tokenizer, name, CALLING)
    (call,) = message["tool_calls"]
    assert call.function == CALL.function
    assert "unparsed_tool_calls" not in message
    # Only Kimi writes call ids into the format (Harmony, Hermes and DeepSeek blocks have none).
    assert call.id == (CALL.id if name == "kimi_k2" else None)
    # The visible text survives; some formats keep the separator newline before the call.
    assert get_text_content(message).strip() == "Let me check."


def test_chatml_tool_calls_round_trip_exactly(test_tokenizer: Any) -> None:
    # Hermes-style blocks carry name and arguments only, so calls without ids round-trip exactly.
    one_call: Message = {**CALLING, "tool_calls": [CALL.model_copy(update={"id": None})]}  # type: ignore[typeddict-item]
    two_calls: Message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            ToolCall(function=ToolCall.FunctionBody(name="a", arguments="{}")),
            ToolCall(function=ToolCall.FunctionBody(name="b", arguments='{"x": [1, 2]}')),
        ],
    }
    for reply in (one_call, two_calls):
        assert _round_trip(test_tokenizer, "chatml", reply) == reply


@pytest.mark.parametrize("name", ALL)
def test_cut_off_reply_is_malformed_but_still_readable(test_tokenizer: Any, name: str) -> None:
    renderer = get_renderer(name, test_tokenizer)
    tokens = _sampled(renderer, PLAIN)
    stops = [s for s in renderer.get_stop_sequences() if isinstance(s, int)]
    cut = [t for t in tokens if t not in stops]
    while name == "role_colon" and "User:" in test_tokenizer.decode(cut):
        cut = cut[:-1]  # its stop is a string: drop the "\n\nUser:" tail instead
    message, termination = renderer.parse_response(cut)
    assert termination == ParseTermination.MALFORMED
    assert not termination.is_clean
    assert "It is sunny" in get_text_content(message)


def test_two_stop_tokens_mean_the_sampler_was_misconfigured(test_tokenizer: Any) -> None:
    renderer = get_renderer("qwen3", test_tokenizer)
    tokens = _sampled(renderer, PLAIN)
    with pytest.raises(RendererError, match="stop tokens"):
        renderer.parse_response(tokens + tokens)


def test_eos_instead_of_stop_sequence_is_a_clean_eos_end(test_tokenizer: Any) -> None:
    eos = test_tokenizer.eos_token_id
    for name in ("chatml", "role_colon"):
        renderer = get_renderer(name, test_tokenizer)
        text_tokens = test_tokenizer.encode(
            " It is sunny." if name == "role_colon" else "It is sunny.", add_special_tokens=False
        )
        message, termination = renderer.parse_response([*text_tokens, eos])
        assert termination == ParseTermination.EOS and termination.is_clean
        assert not termination.is_stop_sequence
        assert message == PLAIN


def test_unclosed_tool_call_is_reported_as_unparsed(test_tokenizer: Any) -> None:
    renderer = get_renderer("qwen3_instruct", test_tokenizer)
    text = 'Checking.\n<tool_call>\n{"name": "get_weather"'
    tokens = [
        *test_tokenizer.encode(text, add_special_tokens=False),
        *renderer.get_stop_sequences(),
    ]
    message, termination = renderer.parse_response(tokens)  # type: ignore[arg-type]
    assert termination.is_clean
    (unparsed,) = message["unparsed_tool_calls"]
    assert unparsed.error.startswith("unterminated tool block")


def test_invalid_tool_json_is_kept_as_unparsed(test_tokenizer: Any) -> None:
    renderer = get_renderer("chatml", test_tokenizer)
    text = "<tool_call>\n{not json}\n</tool_call>"
    tokens = [
        *test_tokenizer.encode(text, add_special_tokens=False),
        *renderer.get_stop_sequences(),
    ]
    message, _ = renderer.parse_response(tokens)  # type: ignore[arg-type]
    assert "tool_calls" not in message
    (unparsed,) = message["unparsed_tool_calls"]
    assert unparsed.raw_text == text and unparsed.error.startswith("Invalid JSON")
