"""POST /v1/responses: the translation onto chat (pure, on dicts) and the real `openai` client
(create, stream, the Agents SDK) against the session's `kitchen serve`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kitchen.serve.errors import UserError
from kitchen.serve.openai import responses
from tests.openai_serve.helpers import broken, collect, text_then_tool_call
from tests.tinker_backend.conftest import TINY

openai = pytest.importorskip("openai", reason="the openai client: pip install 'kitchen[eval]'")

TOOL = {
    "type": "function",
    "name": "get_time",
    "description": "The time in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": True,
}
CALL = {
    "type": "function_call",
    "call_id": "call_1",
    "name": "get_time",
    "arguments": '{"city": "Paris"}',
}
RESULT = {"type": "function_call_output", "call_id": "call_1", "output": "12:00"}


def test_input_items_become_the_chat_conversation() -> None:
    body = {
        "model": TINY,
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Time in Paris?"}]},
            {
                "type": "reasoning",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": "ask"}],
            },
            {
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
            },
            CALL,
            {**CALL, "call_id": "call_2", "arguments": '{"city": "Oslo"}'},
            RESULT,
            {**RESULT, "call_id": "call_2", "output": [{"type": "input_text", "text": "13:00"}]},
            {"role": "developer", "content": "Answer now."},
        ],
        "tools": [TOOL],
        "max_output_tokens": 7,
        "temperature": 0,
        "stream": True,
    }
    chat = responses.chat_request(body)
    calls = [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_time", "arguments": '{"city": "Paris"}'},
        },
        {
            "id": "call_2",
            "type": "function",
            "function": {"name": "get_time", "arguments": '{"city": "Oslo"}'},
        },
    ]
    assert chat["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Time in Paris?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "reasoning_content": "ask",
            "tool_calls": calls,
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "12:00", "name": "get_time"},
        {"role": "tool", "tool_call_id": "call_2", "content": "13:00", "name": "get_time"},
        {"role": "system", "content": "Answer now."},
    ]
    assert chat["tools"] == [
        {
            "type": "function",
            "function": {k: TOOL[k] for k in ("name", "description", "parameters")},
        }
    ]
    assert (chat["max_tokens"], chat["temperature"], chat["stream"]) == (7, 0, True)
    assert chat["stream_options"] == {"include_usage": True}  # response.completed carries usage
    # tool_choice "none": the model is not told of the tools.
    assert "tools" not in responses.chat_request({**body, "tool_choice": "none"})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("previous_response_id", "resp_1"),
        ("store", True),
        ("conversation", "conv_1"),
        ("tool_choice", "required"),
        ("tool_choice", {"type": "function", "name": "get_time"}),
        ("tools", [{"type": "web_search"}]),
        ("input", [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]),
        ("input", [{"type": "item_reference", "id": "x"}]),
        ("include", ["message.output_text.logprobs"]),
        ("top_logprobs", 3),
        ("truncation", "auto"),
        ("parallel_tool_calls", False),
        ("text", {"format": {"type": "json_object"}}),
        ("reasoning", {"effort": "high"}),
        ("frobnicate", 1),
    ],
)
def test_what_is_not_served_is_refused_naming_the_field(field: str, value: Any) -> None:
    body = {"model": TINY, "input": "hi", field: value}
    with pytest.raises(UserError, match=field):
        responses.chat_request(body)


def test_neutral_and_harmless_fields_are_taken() -> None:
    body = {
        "model": TINY,
        "input": "hi",
        "store": False,
        "include": [],
        "parallel_tool_calls": True,
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "metadata": {"run": "7"},
        "user": "u",
        "reasoning": {"effort": None},
    }
    assert responses.chat_request(body)["messages"] == [{"role": "user", "content": "hi"}]


def _answer(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16},
    }


def test_a_tool_call_answer_is_a_message_and_function_call_items() -> None:
    from openai.types.responses import Response

    calls = [
        {"id": "call_9", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
    ]
    message = {"role": "assistant", "content": "Let me see.", "tool_calls": calls}
    out = Response.model_validate(
        responses.response({"model": TINY}, _answer(message, "tool_calls"))
    )
    assert [item.type for item in out.output] == ["message", "function_call"]
    assert out.output_text == "Let me see."
    call = out.output[1]
    assert (call.call_id, call.name, call.arguments) == ("call_9", "get_time", "{}")
    assert (out.status, out.usage.input_tokens, out.usage.output_tokens) == ("completed", 11, 5)
    bare = responses.response({"model": TINY}, _answer({**message, "content": ""}, "tool_calls"))
    assert [item["type"] for item in bare["output"]] == ["function_call"]
    thought = responses.response(
        {"model": TINY}, _answer({**message, "reasoning_content": "hmm"}, "tool_calls")
    )
    assert [item["type"] for item in thought["output"]] == ["reasoning", "message", "function_call"]
    assert thought["output"][0]["content"] == [{"type": "reasoning_text", "text": "hmm"}]
    cut = Response.model_validate(
        responses.response(
            {"model": TINY}, _answer({"role": "assistant", "content": "ab"}, "length")
        )
    )
    assert (cut.status, cut.incomplete_details.reason) == ("incomplete", "max_output_tokens")


def test_chat_chunks_become_the_event_sequence_the_client_parses() -> None:
    from openai.types.responses import ResponseStreamEvent
    from pydantic import TypeAdapter

    events = collect(responses.events, text_then_tool_call())
    parsed = [TypeAdapter(ResponseStreamEvent).validate_python(e) for e in events]
    assert [e.type for e in parsed] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in parsed] == list(range(len(parsed)))
    final = parsed[-1].response
    assert final.output_text == "Hello" and final.output[1].arguments == '{"a": 1}'
    assert final.usage.total_tokens == 7
    assert [e.output_index for e in parsed if e.type == "response.output_item.added"] == [0, 1]


def test_a_failure_mid_stream_is_an_error_event_and_response_failed() -> None:
    events = collect(responses.events, broken())
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    assert "the sampler went away" in events[-1]["response"]["error"]["message"]


# Against the session's server.


@pytest.fixture(scope="module")
def aclient(server_url: str) -> Any:
    return lambda: openai.AsyncOpenAI(base_url=f"{server_url}/v1", api_key="unused", max_retries=0)


def test_streamed_response_adds_up_to_the_plain_one(aclient: Any) -> None:
    ask = {"model": TINY, "input": "How long does the chili cook?", "max_output_tokens": 9}
    ask |= {"temperature": 0, "extra_body": {"seed": 3}}

    async def both() -> tuple[Any, list[Any]]:
        client = aclient()
        plain = await client.responses.create(**ask)
        async with client.responses.stream(**ask) as stream:
            events = [e async for e in stream]
        return plain, events

    plain, events = asyncio.run(both())
    kinds = [e.type for e in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert set(kinds[4:-4]) == {"response.output_text.delta"}
    assert kinds[-4:-1] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ]
    streamed = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert streamed == plain.output_text == events[-1].response.output_text
    final = events[-1].response
    assert (final.usage.input_tokens, final.usage.output_tokens) == (
        plain.usage.input_tokens,
        plain.usage.output_tokens,
    )
    # tiny-llama rarely ends a turn in 9 tokens; either way the stream ends as the answer did.
    assert kinds[-1] == f"response.{plain.status}"
    assert plain.status in ("completed", "incomplete")


def test_tools_and_tool_results_are_rendered_into_the_prompt(client: Any) -> None:
    def input_tokens(**ask: Any) -> int:
        out = client.responses.create(model=TINY, max_output_tokens=1, temperature=0, **ask)
        return int(out.usage.input_tokens)

    question = [{"role": "user", "content": "What time is it in Paris?"}]
    bare = input_tokens(input=question)
    with_tools = input_tokens(input=question, tools=[TOOL])
    called = input_tokens(input=[*question, CALL], tools=[TOOL])
    answered = input_tokens(input=[*question, CALL, RESULT], tools=[TOOL])
    assert bare < with_tools < called < answered
    assert input_tokens(input=question, tools=[TOOL], tool_choice="none") == bare


def test_malformed_requests_are_400s_naming_the_field(client: Any) -> None:
    with pytest.raises(openai.BadRequestError, match="previous_response_id"):
        client.responses.create(model=TINY, input="hi", previous_response_id="resp_1")
    with pytest.raises(openai.BadRequestError, match="max_output_tokens"):
        client.responses.create(model=TINY, input="hi", max_output_tokens=0)
    with pytest.raises(openai.BadRequestError, match=r"input\[0\]\.type"):
        client.responses.create(model=TINY, input=[{"type": "web_search_call", "id": "w"}])
    with pytest.raises(openai.BadRequestError, match="tool_choice"):
        client.responses.create(model=TINY, input="hi", tools=[TOOL], tool_choice="required")


def test_an_agents_sdk_agent_with_a_function_tool_runs_on_it(server_url: str, client: Any) -> None:
    agents = pytest.importorskip("agents", reason="the OpenAI Agents SDK")
    agents.set_tracing_disabled(True)  # traces would go to OpenAI's servers

    @agents.function_tool
    def get_time(city: str) -> str:
        """The time in a city."""
        return "12:00"

    agent_client = openai.AsyncOpenAI(base_url=f"{server_url}/v1", api_key="unused", max_retries=0)
    agent = agents.Agent(
        name="clock",
        instructions="Be brief.",
        tools=[get_time],
        model=agents.OpenAIResponsesModel(model=TINY, openai_client=agent_client),
        model_settings=agents.ModelSettings(max_tokens=6, temperature=0),
    )
    result = asyncio.run(agents.Runner.run(agent, "What time is it in Paris?", max_turns=3))
    first = result.raw_responses[0]
    assert isinstance(result.final_output, str)
    assert first.usage.output_tokens >= 1
    bare = client.responses.create(
        model=TINY, instructions="Be brief.", input="What time is it in Paris?", max_output_tokens=1
    )
    assert first.usage.input_tokens > bare.usage.input_tokens  # the tool is in the prompt
