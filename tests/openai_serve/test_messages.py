"""POST /v1/messages: the translation onto chat (pure, on dicts) and the real `anthropic`
client (create, stream) against the session's `kitchen serve`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kitchen.serve.errors import UserError
from kitchen.serve.openai import messages
from tests.openai_serve.helpers import broken, collect, text_then_tool_call
from tests.tinker_backend.conftest import TINY

anthropic = pytest.importorskip("anthropic", reason="the anthropic client")

TOOL = {
    "name": "get_time",
    "description": "The time in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
QUESTION = {"role": "user", "content": "What time is it in Paris?"}
USE = {
    "role": "assistant",
    "content": [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_time", "input": {"city": "Paris"}},
    ],
}
RESULT = {
    "role": "user",
    "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "12:00"}],
}


def test_blocks_become_the_chat_conversation() -> None:
    body = {
        "model": TINY,
        "max_tokens": 7,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            QUESTION,
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "ask", "signature": "s"},
                    *USE["content"],
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "12:00"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": [{"type": "text", "text": "no clock"}],
                        "is_error": True,
                    },
                    {"type": "text", "text": "And Oslo?"},
                ],
            },
        ],
        "tools": [TOOL],
        "temperature": 0,
    }
    chat = messages.chat_request(body)
    call = {"name": "get_time", "arguments": '{"city": "Paris"}'}
    assert chat["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What time is it in Paris?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "reasoning_content": "ask",
            "tool_calls": [{"id": "toolu_1", "type": "function", "function": call}],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "12:00"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: no clock"},
        {"role": "user", "content": "And Oslo?"},
    ]
    assert chat["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_time",
                "description": "The time in a city.",
                "parameters": TOOL["input_schema"],
            },
        }
    ]
    assert (chat["max_tokens"], chat["temperature"]) == (7, 0)
    assert "tools" not in messages.chat_request({**body, "tool_choice": {"type": "none"}})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tool_choice", {"type": "any"}),
        ("tool_choice", {"type": "tool", "name": "get_time"}),
        ("tool_choice", {"type": "auto", "disable_parallel_tool_use": True}),
        ("top_k", 5),
        ("thinking", {"type": "enabled", "budget_tokens": 1024}),
        ("tools", [{"type": "web_search_20250305", "name": "web_search"}]),
        ("messages", [{"role": "user", "content": [{"type": "image", "source": {}}]}]),
        (
            "messages",
            [{"role": "assistant", "content": [{"type": "redacted_thinking", "data": "x"}]}],
        ),
        ("mcp_servers", [{"type": "url", "url": "http://x", "name": "x"}]),
        ("frobnicate", 1),
    ],
)
def test_what_is_not_served_is_refused_naming_the_field(field: str, value: Any) -> None:
    body = {"model": TINY, "max_tokens": 4, "messages": [QUESTION], field: value}
    with pytest.raises(UserError, match=field):
        messages.chat_request(body)


def test_required_fields_and_streamed_stop_sequences_are_refused() -> None:
    with pytest.raises(UserError, match="max_tokens: field required"):
        messages.chat_request({"model": TINY, "messages": [QUESTION]})
    with pytest.raises(UserError, match="stop_sequences with stream=true"):
        body = {"model": TINY, "max_tokens": 4, "messages": [QUESTION], "stream": True}
        messages.chat_request({**body, "stop_sequences": ["."]})


def _answer(reply: dict[str, Any], finish: str, tokens: list[str] | None = None) -> dict[str, Any]:
    logprobs = (
        None if tokens is None else {"content": [{"token": t, "logprob": -1.0} for t in tokens]}
    )
    return {
        "choices": [{"index": 0, "message": reply, "logprobs": logprobs, "finish_reason": finish}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16},
    }


def test_a_tool_call_answer_is_text_and_tool_use_blocks() -> None:
    from anthropic.types import Message

    calls = [
        {
            "id": "call_9",
            "type": "function",
            "function": {"name": "get_time", "arguments": '{"city": "Oslo"}'},
        }
    ]
    reply = {"role": "assistant", "content": "Let me see.", "tool_calls": calls}
    out = Message.model_validate(messages.message({"model": TINY}, _answer(reply, "tool_calls")))
    assert [b.type for b in out.content] == ["text", "tool_use"]
    use = out.content[1]
    assert (use.id, use.name, use.input) == ("call_9", "get_time", {"city": "Oslo"})
    assert (out.stop_reason, out.usage.input_tokens, out.usage.output_tokens) == ("tool_use", 11, 5)
    cut = messages.message(
        {"model": TINY}, _answer({"role": "assistant", "content": "ab"}, "length")
    )
    assert cut["stop_reason"] == "max_tokens"


def test_stop_reason_tells_a_stop_sequence_from_the_end_of_the_turn() -> None:
    body = {"model": TINY, "stop_sequences": ["END", "\n\n"]}
    reply = {"role": "assistant", "content": "Two"}
    hit = messages.message(body, _answer(reply, "stop", ["Two", " E", "ND"]))
    assert (hit["stop_reason"], hit["stop_sequence"]) == ("stop_sequence", "END")
    turn = messages.message(body, _answer(reply, "stop", ["Two", "<|im_end|>"]))
    assert (turn["stop_reason"], turn["stop_sequence"]) == ("end_turn", None)


def test_chat_chunks_become_the_event_sequence_the_client_parses() -> None:
    from anthropic.types import RawMessageStreamEvent
    from pydantic import TypeAdapter

    events = collect(messages.events, text_then_tool_call())
    parsed = [TypeAdapter(RawMessageStreamEvent).validate_python(e) for e in events]
    assert [(e.type, getattr(e, "index", None)) for e in parsed] == [
        ("message_start", None),
        ("content_block_start", 0),
        ("content_block_delta", 0),
        ("content_block_delta", 0),
        ("content_block_stop", 0),
        ("content_block_start", 1),
        ("content_block_delta", 1),
        ("content_block_stop", 1),
        ("message_delta", None),
        ("message_stop", None),
    ]
    delta = parsed[-2]
    assert (delta.delta.stop_reason, delta.usage.input_tokens, delta.usage.output_tokens) == (
        "tool_use",
        4,
        3,
    )
    assert parsed[6].delta.partial_json == '{"a": 1}'


def test_a_failure_mid_stream_is_an_error_event() -> None:
    events = collect(messages.events, broken())
    assert [e["type"] for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "error",
    ]
    assert "the sampler went away" in events[-1]["error"]["message"]


# Against the session's server.


@pytest.fixture(scope="module")
def claude(server_url: str) -> Any:
    return anthropic.Anthropic(base_url=server_url, api_key="unused", max_retries=0)


def test_streamed_message_adds_up_to_the_plain_one(server_url: str) -> None:
    ask = {"model": TINY, "max_tokens": 9, "messages": [QUESTION]}
    ask["extra_body"] = {"temperature": 0, "seed": 3}

    async def both() -> tuple[Any, list[Any], Any]:
        client = anthropic.AsyncAnthropic(base_url=server_url, api_key="unused", max_retries=0)
        plain = await client.messages.create(**ask)
        async with client.messages.stream(**ask) as stream:
            events = [e async for e in stream]
            final = await stream.get_final_message()
        return plain, events, final

    plain, events, final = asyncio.run(both())
    raw = [e.type for e in events if e.type != "text"]  # "text": the helper's own event
    assert raw[:2] == ["message_start", "content_block_start"]
    assert set(raw[2:-3]) == {"content_block_delta"}
    assert raw[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    streamed = "".join(e.delta.text for e in events if e.type == "content_block_delta")
    assert [b.type for b in plain.content] == ["text"]
    assert streamed == plain.content[0].text == final.content[0].text
    assert final.stop_reason == plain.stop_reason
    assert (final.usage.input_tokens, final.usage.output_tokens) == (
        plain.usage.input_tokens,
        plain.usage.output_tokens,
    )


def test_tools_and_tool_results_are_rendered_into_the_prompt(claude: Any) -> None:
    def input_tokens(**ask: Any) -> int:
        out = claude.messages.create(model=TINY, max_tokens=1, extra_body={"temperature": 0}, **ask)
        return int(out.usage.input_tokens)

    bare = input_tokens(messages=[QUESTION])
    with_tools = input_tokens(messages=[QUESTION], tools=[TOOL])
    answered = input_tokens(messages=[QUESTION, USE, RESULT], tools=[TOOL])
    assert bare < with_tools < answered
    assert input_tokens(messages=[QUESTION], tools=[TOOL], tool_choice={"type": "none"}) == bare


def test_a_stop_sequence_ends_the_text_before_it(claude: Any) -> None:
    ask = {
        "model": TINY,
        "max_tokens": 12,
        "messages": [QUESTION],
        "extra_body": {"temperature": 0},
    }
    text = claude.messages.create(**ask).content[0].text
    stop = text[len(text) // 2 : len(text) // 2 + 2]
    cut = claude.messages.create(**ask, stop_sequences=[stop])
    assert "".join(b.text for b in cut.content) == text[: text.index(stop)]
    assert (cut.stop_reason, cut.stop_sequence) == ("stop_sequence", stop)


def test_malformed_requests_are_400s_naming_the_field(claude: Any, server_url: str) -> None:
    import httpx

    for route, shape in (("messages", "type"), ("responses", "error")):
        answer = httpx.post(f"{server_url}/v1/{route}", content=b"[1, 2]")
        assert answer.status_code == 400
        assert shape in answer.json() and "body: expected a JSON object" in answer.text
    ask = {"model": TINY, "max_tokens": 4, "messages": [QUESTION]}
    with pytest.raises(anthropic.BadRequestError, match="tool_choice"):
        claude.messages.create(**ask, tools=[TOOL], tool_choice={"type": "any"})
    with pytest.raises(anthropic.BadRequestError, match="temperature"):
        claude.messages.create(**ask, extra_body={"temperature": 5})
    with pytest.raises(anthropic.BadRequestError, match="max_tokens"):
        claude.messages.create(model=TINY, max_tokens=0, messages=[QUESTION])
    with pytest.raises(anthropic.BadRequestError, match=r"messages\[0\]\.role"):
        claude.messages.create(
            model=TINY, max_tokens=4, messages=[{"role": "system", "content": "x"}]
        )
