"""The agent gateway on tiny-llama with the real `openai` client: a 2-turn agent with one tool,
in-process and over HTTP, recorded token for token; token ids and logprobs on request; snapshots
released as the policy moves."""

from __future__ import annotations

import asyncio
import gc
import json
import weakref
from typing import Any

import pytest

from kitchen.ports.agents import POLICY_MODEL, ROLLOUT_HEADER, AgentGateway
from kitchen.serve.gateway import open_gateway
from tests.agents.helpers import two_tool_turns

openai = pytest.importorskip("openai", reason="the openai client: pip install 'kitchen[eval]'")
TINY = "kitchen/tiny-llama"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "The weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="module")
def training():  # type: ignore[no-untyped-def]
    from kitchen.adapters.local import create_local_backend
    from kitchen.ports import BackendSettings

    backend = create_local_backend(BackendSettings())
    client = backend.create_lora_training_client(TINY, rank=4, seed=0)
    yield client
    backend.close()


@pytest.fixture
def gateway(training):  # type: ignore[no-untyped-def]
    with open_gateway(policy=training.save_weights_and_get_sampling_client(), version=3) as g:
        yield g


async def _agent(client: Any) -> list[Any]:
    """A 2-turn tool agent as users write them: the reply goes back into the history as the
    client returned it, then a tool result (or a nudge, when the tiny model called none)."""
    messages = [
        {"role": "system", "content": "You answer with the weather tool."},
        {"role": "user", "content": "Is it raining in Paris?"},
    ]
    return await two_tool_turns(
        client,
        messages,
        TOOLS,
        tool_result="rain, 12 C",
        nudge="Call the weather tool.",
        max_tokens=6,
        temperature=0.8,
        logprobs=True,
    )


def _check_records(records: list[Any], responses: list[Any], version: int) -> None:
    assert len(records) == len(responses) == 2
    for record, response in zip(records, responses, strict=True):
        choice = response.choices[0]
        assert list(record.prompt_tokens) == response.prompt_token_ids
        assert list(record.sampled_tokens) == choice.token_ids
        assert list(record.sampled_logprobs) == [t.logprob for t in choice.logprobs.content]
        assert record.sampler_version == version
        assert record.stop_reason in ("stop", "length")
    first, second = records
    head = (*first.prompt_tokens, *first.sampled_tokens)
    assert (first.extends_previous, second.extends_previous) == (False, True)
    assert second.prompt_tokens[: len(head)] == head


def test_the_gateway_is_the_port(gateway) -> None:
    assert isinstance(gateway, AgentGateway)
    assert gateway.base_url("r") is None  # no port opened


def test_a_two_turn_tool_agent_in_process_is_recorded_token_for_token(gateway) -> None:
    responses = asyncio.run(_agent(gateway.client("episode-1")))
    _check_records(gateway.take("episode-1"), responses, version=3)
    assert gateway.take("episode-1") == []  # taken once


def test_the_same_agent_over_http_by_path_and_by_header(gateway) -> None:
    url = gateway.listen()
    assert gateway.base_url("ep-2") == f"{url}/rollouts/ep-2/v1"

    async def over_http(base_url: str, headers: dict[str, str]) -> list[Any]:
        options = {"api_key": "x", "max_retries": 0, "default_headers": headers}
        async with openai.AsyncOpenAI(base_url=base_url, **options) as client:
            return await _agent(client)

    responses = asyncio.run(over_http(gateway.base_url("ep-2"), {}))
    _check_records(gateway.take("ep-2"), responses, version=3)
    responses = asyncio.run(over_http(f"{url}/v1", {ROLLOUT_HEADER: "ep-3"}))
    _check_records(gateway.take("ep-3"), responses, version=3)


def test_a_call_without_an_address_is_not_recorded(gateway) -> None:
    async def call() -> None:
        client = gateway.client("ep-4")
        client = client.with_options(base_url=str(client.base_url).split("/rollouts/")[0] + "/v1")
        await client.chat.completions.create(
            model=POLICY_MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=2
        )

    asyncio.run(call())
    assert gateway.book.addresses() == []


def test_a_client_that_edits_history_gets_a_fresh_render(gateway) -> None:
    async def run() -> None:
        client = gateway.client("ep-5")
        messages = [{"role": "user", "content": "Tell me about soup."}]
        first = await client.chat.completions.create(
            model=POLICY_MODEL, messages=messages, max_tokens=4
        )
        # Edited at its start: an edit after the reply's text can re-render as the sampled tokens
        # plus more, which is an exact extension (the record's test is on tokens).
        reply = first.choices[0].message.content or ""
        edited = {"role": "assistant", "content": "(edited) " + reply}
        await client.chat.completions.create(
            model=POLICY_MODEL,
            messages=[*messages, edited, {"role": "user", "content": "More."}],
            max_tokens=4,
        )

    asyncio.run(run())
    assert [r.extends_previous for r in gateway.take("ep-5")] == [False, False]


def test_streamed_logprobs_and_token_ids_add_up_to_the_record(gateway) -> None:
    async def run() -> list[Any]:
        stream = await gateway.client("ep-6").chat.completions.create(
            model=POLICY_MODEL,
            messages=[{"role": "user", "content": "Count to three."}],
            max_tokens=8,
            temperature=0.7,
            logprobs=True,
            stream=True,
            extra_body={"return_token_ids": True},
        )
        return [chunk async for chunk in stream]

    chunks = asyncio.run(run())
    (record,) = gateway.take("ep-6")
    assert chunks[0].prompt_token_ids == list(record.prompt_tokens)
    ids, logprobs = [], []
    for chunk in chunks:
        for choice in chunk.choices:
            ids += getattr(choice, "token_ids", None) or []
            logprobs += [t.logprob for t in (choice.logprobs.content if choice.logprobs else [])]
    assert ids == list(record.sampled_tokens)
    assert logprobs == list(record.sampled_logprobs)


def test_completions_report_the_samplers_own_logprobs_and_token_ids(gateway) -> None:
    async def run() -> Any:
        return await gateway.client("ep-7").completions.create(
            model=POLICY_MODEL,
            prompt="The soup needs",
            max_tokens=6,
            temperature=1.5,
            logprobs=2,
            extra_body={"return_token_ids": True},
        )

    out = asyncio.run(run())
    (record,) = gateway.take("ep-7")
    choice = out.choices[0]
    assert choice.prompt_token_ids == list(record.prompt_tokens)
    assert choice.token_ids == list(record.sampled_tokens)
    # At temperature 1.5 the sampler's logprobs differ from a temperature-1 rescoring's, whose
    # alternatives top_logprobs lists: reported are the sampler's.
    assert choice.logprobs.token_logprobs == list(record.sampled_logprobs)
    assert len(choice.logprobs.top_logprobs) == len(record.sampled_tokens)


def test_mistakes_are_refused_in_one_line_naming_the_field(gateway) -> None:
    client = gateway.client("ep-8")
    user = [{"role": "user", "content": "hi"}]

    async def refused(**kwargs: Any) -> str:
        with pytest.raises(openai.BadRequestError) as e:
            await client.chat.completions.create(model=POLICY_MODEL, max_tokens=2, **kwargs)
        message = e.value.body["message"]  # type: ignore[index]
        assert "\n" not in message
        return str(message)

    async def run() -> None:
        assert "messages" in await refused(messages="hi")
        assert "temperature" in await refused(messages=user, temperature="hot")
        assert "tool_choice" in await refused(messages=user, tools=TOOLS, tool_choice="required")
        assert "response_format" in await refused(
            messages=user, response_format={"type": "json_object"}
        )
        assert "messages.0.role" in await refused(messages=[{"content": "no role"}])
        assert "n=2" in await refused(messages=user, n=2)  # a rollout is one sequence of calls
        other = client.with_options(default_headers={ROLLOUT_HEADER: "elsewhere"})
        with pytest.raises(openai.BadRequestError, match="use one"):
            await other.chat.completions.create(model=POLICY_MODEL, messages=user, max_tokens=2)

    asyncio.run(run())
    assert gateway.take("ep-8") == []


def test_tool_choice_none_declares_no_tools(gateway, training) -> None:
    async def run(choice: str) -> list[int]:
        out = await gateway.client("ep-9").chat.completions.create(
            model=POLICY_MODEL,
            messages=[{"role": "user", "content": "hi"}],
            tools=TOOLS,
            tool_choice=choice,
            max_tokens=1,
            extra_body={"return_token_ids": True},
        )
        return list(out.prompt_token_ids)

    auto, none = asyncio.run(run("auto")), asyncio.run(run("none"))
    tokenizer = training.get_tokenizer()
    assert "weather" in tokenizer.decode(auto) and "weather" not in tokenizer.decode(none)


def test_fifty_policy_swaps_keep_the_live_snapshots_bounded(gateway, training) -> None:
    """Each swap while a call holds the current snapshot: the old one lives until that call ends,
    then is freed; over 50 swaps at most 2 are ever live, and the replaced samplers are garbage."""
    replaced: list[weakref.ref[Any]] = []
    live = []

    async def run() -> None:
        client = gateway.client("ep-10")
        for version in range(4, 54):
            held = await gateway.lease(POLICY_MODEL, "ep-10")  # a call in flight on it
            replaced.append(weakref.ref(held.model.sampler))
            gateway.set_policy(training.save_weights_and_get_sampling_client(), version)
            live.append(gateway.live_snapshots())
            await client.chat.completions.create(
                model=POLICY_MODEL, messages=[{"role": "user", "content": "go"}], max_tokens=2
            )
            held.release()
            live.append(gateway.live_snapshots())
            del held

    asyncio.run(run())
    gc.collect()
    assert live == [2, 1] * 50
    assert [r.sampler_version for r in gateway.take("ep-10")] == list(range(4, 54))
    assert [r() is None for r in replaced] == [True] * 50


def test_records_are_served_per_address(gateway) -> None:
    import httpx

    url = gateway.listen()
    asyncio.run(_agent(gateway.client("ep-11")))
    calls = httpx.get(f"{url}/kitchen/v1/rollouts/ep-11/calls").json()["calls"]
    taken = httpx.post(f"{url}/kitchen/v1/rollouts/ep-11/take").json()["calls"]
    assert calls == taken and [c["turn"] for c in calls] == [0, 1]
    assert httpx.get(f"{url}/kitchen/v1/rollouts/ep-11/calls").json()["calls"] == []
    assert json.dumps(calls)  # plain JSON


def test_vllms_top_k_is_honoured_and_its_other_extras_refused(gateway) -> None:
    client = gateway.client("ep-12")

    async def ids(**kwargs: Any) -> list[int]:
        out = await client.completions.create(
            model=POLICY_MODEL, prompt="The soup", max_tokens=6, **kwargs
        )
        return list(out.choices[0].token_ids)

    async def run() -> None:
        greedy = await ids(temperature=0, extra_body={"return_token_ids": True})
        top_1 = await ids(
            temperature=1.0, seed=5, extra_body={"return_token_ids": True, "top_k": 1}
        )
        assert top_1 == greedy
        with pytest.raises(openai.BadRequestError, match="min_p"):
            await ids(extra_body={"min_p": 0.1})

    asyncio.run(run())
    gateway.take("ep-12")


def test_the_gateway_over_a_hosted_sampling_client(server_url, monkeypatch) -> None:
    """--backend tinker: the policy is a Tinker-protocol sampling client (kitchen serve here),
    which reports no tokens while sampling; the records and the multi-turn rule are the same."""
    from kitchen.adapters.tinker import create_tinker_backend
    from kitchen.ports import BackendSettings
    from tests.tinker_backend.conftest import TEST_KEY

    monkeypatch.setenv("TINKER_API_KEY", TEST_KEY)
    backend = create_tinker_backend(BackendSettings(base_url=server_url))
    sampler = backend.create_sampling_client(base_model=TINY)

    async def streamed(client: Any) -> list[int]:
        stream = await client.chat.completions.create(
            model=POLICY_MODEL,
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=4,
            stream=True,
            extra_body={"return_token_ids": True},
        )
        chunks = [chunk async for chunk in stream]
        return [t for c in chunks for ch in c.choices for t in getattr(ch, "token_ids", None) or []]

    with open_gateway(policy=sampler, version=7, context=2048) as gateway:
        responses = asyncio.run(_agent(gateway.client("hosted")))
        _check_records(gateway.take("hosted"), responses, version=7)
        ids = asyncio.run(streamed(gateway.client("hosted-stream")))
        assert ids == list(gateway.take("hosted-stream")[0].sampled_tokens)
