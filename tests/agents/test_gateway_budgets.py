"""The gateway spends a rollout's budgets while it runs: the call past its turn, sampled-token or
tool-call budget is answered 400 `rollout_budget_exceeded`, the agent's client raises, and the RL
seam drops the rollout under that budget's kind. Tool calls are counted on every route, streamed
or not; parallel calls on one address are recorded in the order they started.

A scripted sampling client (the port's surface, reporting no tokens while sampling, as a hosted
one) answers with fixed text, cut at the call's max_tokens; the gateway, the chat format, the
routes and the openai client are the real ones."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
from typing import Any

import numpy as np
import pytest
from tinker import types

from kitchen.engine.futures import APIFuture
from kitchen.ports.agents import POLICY_MODEL
from kitchen.serve.gateway import open_gateway
from tests.agents.helpers import record_gateway_takes
from train_core.agents.rollouts import AgentBudgets, AgentGroupBuilder, do_agent_group_rollout
from train_core.renderers.base import encode_without_special_tokens

openai = pytest.importorskip("openai", reason="the openai client: pip install 'kitchen[eval]'")
httpx = pytest.importorskip("httpx")
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]
CALL = '<tool_call>\n{"name": "weather", "arguments": {"city": "Paris"}}\n</tool_call>'
LONG = " ".join(["rain"] * 40)  # more tokens than any call here may sample


class Scripted:
    """Answers every sample with `reply` + <|im_end|>, cut at the call's max_tokens (then its
    stop reason is "length"). `held`: the prompts whose sample waits until `release`d."""

    def __init__(self, tokenizer: Any, reply: str) -> None:
        self.tokenizer = tokenizer
        end = encode_without_special_tokens(tokenizer, "<|im_end|>")
        self._reply = encode_without_special_tokens(tokenizer, reply) + end
        self.max_tokens: list[int | None] = []
        self.prompts: list[list[int]] = []
        self.held: dict[str, concurrent.futures.Future[Any]] = {}
        self.hold_on: str | None = None

    def sample(
        self, prompt: types.ModelInput, num_samples: int, sampling_params: Any, **_: Any
    ) -> APIFuture[types.SampleResponse]:
        self.prompts.append(prompt.to_ints())
        self.max_tokens.append(sampling_params.max_tokens)
        limit = sampling_params.max_tokens
        tokens = self._reply if limit is None else self._reply[:limit]
        sequence = types.SampledSequence(
            stop_reason="length" if len(tokens) < len(self._reply) else "stop",
            sequence_id="scripted",
            tokens_np=np.asarray(tokens, dtype=np.int32),
            logprobs_np=np.full(len(tokens), -0.5, dtype=np.float32),
        )
        answer = types.SampleResponse(sequences=[sequence])
        inner: concurrent.futures.Future[Any] = concurrent.futures.Future()
        text = self.tokenizer.decode(prompt.to_ints())
        if self.hold_on is not None and self.hold_on in text:
            self.held[self.hold_on] = inner
            self.hold_on = None
            inner.answer = answer  # type: ignore[attr-defined]
        else:
            inner.set_result(answer)
        return APIFuture(inner)

    def release(self, key: str) -> None:
        inner = self.held.pop(key)
        inner.set_result(inner.answer)  # type: ignore[attr-defined]

    def get_tokenizer(self) -> Any:
        return self.tokenizer

    def eos_ids(self) -> set[int]:
        return {self.tokenizer.eos_token_id}

    def get_base_model(self) -> str:
        return "kitchen/tiny-llama"


@pytest.fixture(scope="module")
def tokenizer():  # type: ignore[no-untyped-def]
    import transformers

    from kitchen.adapters.local.model.locate import resolve_model

    return transformers.AutoTokenizer.from_pretrained(str(resolve_model("kitchen/tiny-llama")))


def _gateway(tokenizer: Any, reply: str) -> Any:
    return open_gateway(policy=Scripted(tokenizer, reply), version=1, renderer="chatml")


def _group(gateway: Any, agent: Any, budgets: AgentBudgets, size: int = 2) -> Any:
    builder = AgentGroupBuilder(agent, {"question": "Weather?"}, size)
    return asyncio.run(do_agent_group_rollout(builder, gateway, "0-0", budgets))


def _budget_error(error: BaseException) -> tuple[int, str, str]:
    """(HTTP status, code, param) of the error an openai client raised."""
    assert isinstance(error, openai.BadRequestError), repr(error)
    body = error.body if isinstance(error.body, dict) else {}
    return error.status_code, body.get("code"), body.get("param")


# -- 1. budgets enforced live ---------------------------------------------------------------------


def test_an_agent_that_loops_forever_is_stopped_at_its_turn_budget(
    tokenizer: Any, monkeypatch: Any
) -> None:
    taken = record_gateway_takes(monkeypatch)
    seen: dict[str, Any] = {}

    async def forever(client: Any, task: Any) -> float:
        calls = 0
        try:
            while True:
                await client.chat.completions.create(
                    model=POLICY_MODEL,
                    messages=[{"role": "user", "content": task["question"]}],
                    max_tokens=4,
                )
                calls += 1
        except openai.APIError as e:
            seen[str(client.base_url)] = (calls, e)
            raise

    start = time.monotonic()
    with _gateway(tokenizer, LONG) as gateway:
        outcome = _group(gateway, forever, AgentBudgets(wall_time_s=600, max_turns=3))
    elapsed = time.monotonic() - start
    assert outcome.group is None  # both dropped: nothing left to train
    assert [f.kind for f in outcome.failures] == ["over_turns", "over_turns"]
    assert "turn budget of 3 calls (max_turns)" in outcome.failures[0].message
    assert len(seen) == 2
    for calls, error in seen.values():
        assert calls == 3  # the fourth call raised
        assert _budget_error(error) == (400, "rollout_budget_exceeded", "max_turns")
        assert "rollout '0-0-" in str(error)
    assert sorted(len(records) for records in taken.values()) == [3, 3]
    assert elapsed < 60  # far inside the wall-time budget of 600 s that would have cancelled it


def test_an_agent_that_swallows_the_refusal_is_dropped_all_the_same(tokenizer: Any) -> None:
    async def stubborn(client: Any, task: Any) -> float:
        for _ in range(5):
            with contextlib.suppress(openai.BadRequestError):
                await client.chat.completions.create(
                    model=POLICY_MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=2
                )
        return 1.0

    with _gateway(tokenizer, LONG) as gateway:
        outcome = _group(gateway, stubborn, AgentBudgets(max_turns=2, min_group_size=1))
    assert [f.kind for f in outcome.failures] == ["over_turns", "over_turns"]


def test_max_tokens_is_capped_to_the_tokens_left_and_the_call_after_them_refused(
    tokenizer: Any, monkeypatch: Any
) -> None:
    taken = record_gateway_takes(monkeypatch)
    answers: list[Any] = []

    async def forever(client: Any, task: Any) -> float:
        while True:
            answers.append(
                await client.chat.completions.create(
                    model=POLICY_MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=4
                )
            )

    sampler = Scripted(tokenizer, LONG)
    with open_gateway(policy=sampler, version=1, renderer="chatml") as gateway:
        outcome = _group(gateway, forever, AgentBudgets(max_sampled_tokens=10), size=1)
    assert [f.kind for f in outcome.failures] == ["over_sampled_tokens"]
    assert "no tokens left of its budget of 10 (max_sampled_tokens)" in outcome.failures[0].message
    assert sampler.max_tokens == [4, 4, 2]  # the third call was capped to what was left
    assert [a.usage.completion_tokens for a in answers] == [4, 4, 2]
    assert [a.choices[0].finish_reason for a in answers] == ["length"] * 3
    assert [len(r.sampled_tokens) for r in taken["0-0-0"]] == [4, 4, 2]


def test_a_call_asking_no_limit_samples_at_most_the_tokens_left(tokenizer: Any) -> None:
    with _gateway(tokenizer, LONG) as gateway:
        meter = gateway.limit("r", AgentBudgets(max_sampled_tokens=7))
        client = gateway.client("r")
        messages = [{"role": "user", "content": "hi"}]

        async def two() -> Any:
            answer = await client.chat.completions.create(model=POLICY_MODEL, messages=messages)
            with pytest.raises(openai.BadRequestError) as refused:
                await client.chat.completions.create(model=POLICY_MODEL, messages=messages)
            return answer, refused.value

        answer, refused = asyncio.run(two())
        records = gateway.take("r")
    assert answer.usage.completion_tokens == 7 == meter.sampled_tokens
    assert _budget_error(refused) == (400, "rollout_budget_exceeded", "max_sampled_tokens")
    assert len(records) == 1


def test_the_reply_past_the_tool_call_budget_is_refused_and_the_rollout_dropped(
    tokenizer: Any, monkeypatch: Any
) -> None:
    taken = record_gateway_takes(monkeypatch)
    errors: list[Any] = []

    async def tool_loop(client: Any, task: Any) -> float:
        messages: list[Any] = [{"role": "user", "content": "Weather?"}]
        try:
            while True:
                answer = await client.chat.completions.create(
                    model=POLICY_MODEL, messages=messages, tools=TOOLS, max_tokens=64
                )
                reply = answer.choices[0].message
                messages.append(reply.model_dump(exclude_none=True))
                for call in reply.tool_calls or []:
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": "rain"})
        except openai.APIError as e:
            errors.append(e)
            raise

    with _gateway(tokenizer, CALL) as gateway:
        outcome = _group(gateway, tool_loop, AgentBudgets(max_tool_calls=2), size=1)
    assert [f.kind for f in outcome.failures] == ["over_tool_calls"]
    assert "tool call 3, past its budget of 2 (max_tool_calls)" in outcome.failures[0].message
    assert _budget_error(errors[0]) == (400, "rollout_budget_exceeded", "max_tool_calls")
    assert len(taken["0-0-0"]) == 2  # the refused reply was never returned, nor recorded


def test_a_rollout_within_its_budgets_trains_with_the_gateways_tool_call_count(
    tokenizer: Any,
) -> None:
    async def one_call(client: Any, task: Any) -> float:
        stream = await client.chat.completions.create(
            model=POLICY_MODEL,
            messages=[{"role": "user", "content": "Weather?"}],
            tools=TOOLS,
            stream=True,
        )
        return float(len([chunk async for chunk in stream]))

    budgets = AgentBudgets(max_turns=1, max_sampled_tokens=100, max_tool_calls=1)
    with _gateway(tokenizer, CALL) as gateway:
        outcome = _group(gateway, one_call, budgets)
    assert outcome.failures == []
    assert outcome.group is not None and len(outcome.group.trajectories_G) == 2
    assert (outcome.calls, outcome.tool_calls) == (2, 2)  # streamed: counted by the gateway


# -- 2. tool calls counted on every route ---------------------------------------------------------

BODIES = {
    "/v1/completions": {"prompt": "Weather?", "max_tokens": 4},
    "/v1/chat/completions": {
        "messages": [{"role": "user", "content": "Weather?"}],
        "tools": TOOLS,
        "max_tokens": 64,
    },
    "/v1/responses": {
        "input": "Weather?",
        "tools": [{"type": "function", "name": "weather", "parameters": {"type": "object"}}],
        "max_output_tokens": 64,
    },
    "/v1/messages": {
        "messages": [{"role": "user", "content": "Weather?"}],
        "tools": [{"name": "weather", "input_schema": {"type": "object"}}],
        "max_tokens": 64,
    },
}
# What each route's answer holds a tool call in (streamed chat sends the text itself as content).
CALL_MARK = {
    "/v1/chat/completions": '"tool_calls"',
    "/v1/responses": '"function_call"',
    "/v1/messages": '"tool_use"',
}
ROUTES = [(route, stream) for route in CALL_MARK for stream in (False, True)]


def _post(gateway: Any, address: str, route: str, stream: bool) -> Any:
    body = {"model": POLICY_MODEL, **BODIES[route], "stream": stream}

    async def post() -> Any:
        transport = httpx.ASGITransport(app=gateway.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            return await http.post(f"/rollouts/{address}{route}", json=body)

    return asyncio.run(post())


@pytest.mark.parametrize(("route", "stream"), ROUTES)
def test_tool_calls_are_counted_on_every_route_streamed_or_not(
    tokenizer: Any, route: str, stream: bool
) -> None:
    with _gateway(tokenizer, CALL) as gateway:
        meter = gateway.limit("r", AgentBudgets())
        answer = _post(gateway, "r", route, stream)
        records = gateway.take("r")
    assert answer.status_code == 200, answer.text
    assert CALL_MARK[route] in answer.text  # the call went back to the client
    assert (meter.turns, meter.tool_calls, len(records)) == (1, 1, 1)
    assert meter.sampled_tokens == len(records[0].sampled_tokens)


@pytest.mark.parametrize(("route", "stream"), ROUTES)
def test_the_tool_call_budget_refuses_on_every_route_streamed_or_not(
    tokenizer: Any, route: str, stream: bool
) -> None:
    with _gateway(tokenizer, CALL) as gateway:
        meter = gateway.limit("r", AgentBudgets(max_tool_calls=0))
        answer = _post(gateway, "r", route, stream)
        records = gateway.take("r")
    assert meter.refusal is not None and meter.refusal.kind == "over_tool_calls"
    assert records == []
    assert "max_tool_calls" in answer.text
    if not stream:  # refused before any byte was sent
        assert answer.status_code == 400
        error = answer.json()["error"]
        if route != "/v1/messages":  # Anthropic's error shape has no code
            assert (error["code"], error["param"]) == ("rollout_budget_exceeded", "max_tool_calls")
    else:  # the stream ends with the error, and never with the call
        assert CALL_MARK[route] not in answer.text
        if route != "/v1/messages":
            assert "rollout_budget_exceeded" in answer.text


def test_a_streamed_chat_call_past_its_tool_call_budget_raises_in_the_openai_client(
    tokenizer: Any,
) -> None:
    with _gateway(tokenizer, CALL) as gateway:
        gateway.limit("r", AgentBudgets(max_tool_calls=0))
        client = gateway.client("r")

        async def read() -> None:
            stream = await client.chat.completions.create(
                model=POLICY_MODEL,
                messages=[{"role": "user", "content": "Weather?"}],
                tools=TOOLS,
                stream=True,
            )
            async for _ in stream:
                pass

        with pytest.raises(openai.APIError, match="max_tool_calls") as caught:
            asyncio.run(read())
    assert caught.value.body["code"] == "rollout_budget_exceeded"


@pytest.mark.parametrize(("route", "stream"), [*ROUTES, ("/v1/completions", False)])
def test_a_call_past_the_turn_budget_is_refused_before_any_byte_on_every_route(
    tokenizer: Any, route: str, stream: bool
) -> None:
    with _gateway(tokenizer, LONG) as gateway:
        gateway.limit("r", AgentBudgets(max_turns=1))
        served = _post(gateway, "r", route, stream)
        refused = _post(gateway, "r", route, stream)
        records = gateway.take("r")
    assert served.status_code == 200, served.text
    assert refused.status_code == 400  # a stream too: refused before its headers
    assert "turn budget of 1 calls (max_turns)" in refused.text
    if route != "/v1/messages":
        error = refused.json()["error"]
        assert (error["code"], error["param"]) == ("rollout_budget_exceeded", "max_turns")
    assert len(records) == 1


def test_a_refused_turn_and_an_unaddressed_call_are_answered_apart(tokenizer: Any) -> None:
    """The budget is the address's: a call without an address is served and spends nothing."""
    with _gateway(tokenizer, LONG) as gateway:
        meter = gateway.limit("r", AgentBudgets(max_turns=0))
        refused = _post(gateway, "r", "/v1/chat/completions", False)

        async def unaddressed() -> Any:
            transport = httpx.ASGITransport(app=gateway.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
                body = {"model": POLICY_MODEL, **BODIES["/v1/chat/completions"]}
                return await http.post("/v1/chat/completions", json=body)

        served = asyncio.run(unaddressed())
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "max_turns"
    assert served.status_code == 200
    assert meter.turns == 0


# -- 3. parallel calls recorded in the order they started -----------------------------------------


def test_parallel_calls_are_recorded_in_the_order_they_started(tokenizer: Any) -> None:
    sampler = Scripted(tokenizer, "Mild.")
    with open_gateway(policy=sampler, version=1, renderer="chatml") as gateway:
        sampler.hold_on = "slow question"
        client = gateway.client("r")

        def ask(text: str) -> Any:
            messages = [{"role": "user", "content": text}]
            return client.chat.completions.create(
                model=POLICY_MODEL, messages=messages, extra_body={"return_token_ids": True}
            )

        async def both() -> tuple[Any, Any]:
            slow = asyncio.ensure_future(ask("the slow question"))
            while "slow question" not in sampler.held:  # the first call is sampling
                await asyncio.sleep(0.01)
            fast = await ask("the fast question")  # starts second, finishes first
            assert not slow.done()
            assert [r.prompt_tokens for r in gateway.book.peek("r")] == [
                tuple(fast.prompt_token_ids)
            ]
            sampler.release("slow question")
            return await slow, fast

        slow, fast = asyncio.run(both())
        records = gateway.take("r")
    assert [list(r.prompt_tokens) for r in records] == [
        slow.prompt_token_ids,
        fast.prompt_token_ids,
    ]
    assert [(r.turn, r.started) for r in records] == [(0, 0), (1, 1)]
    assert "slow question" in tokenizer.decode(list(records[0].prompt_tokens))
