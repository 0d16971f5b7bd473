"""examples/agents_sdk_rl.py: an OpenAI Agents SDK agent with a function tool, trained through the
run's gateway (in-process client). On the fake backend, whose sampler here calls the tool and
then answers from its result, each episode is two calls, the SDK's own tool round trip between
them, and trains as one datum equal to the gateway's records byte for byte."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import numpy as np

from kitchen.adapters.fake import FakeBackend
from kitchen.adapters.fake.backend import FakeTrainingClient
from kitchen.app.launch import run_workflow
from tests.examples.helpers import load_example

EXPRESSION = re.compile(r"What is (\d+) \* (\d+) \+ (\d+)\?")


def _tool_then_answer(prompt_tokens: list[int]) -> str:
    """Call the calculator on the question; once its result is in the prompt, answer with it."""
    text = bytes(t for t in prompt_tokens if t < 256).decode("utf-8", "ignore")
    a, b, c = EXPRESSION.findall(text)[-1]
    if "<tool_call>" not in text.split("What is")[-1]:
        arguments = {"expression": f"{a} * {b} + {c}"}
        return f"<tool_call>\n{json.dumps({'name': 'calculator', 'arguments': arguments})}\n</tool_call>"
    results = re.findall(r"\b(\d+)\b", text.split("</tool_call>")[-1])
    return results[0] if results else "none"


def _episode(records: list[Any]) -> tuple[bytes, bytes]:
    tokens: list[int] = []
    logprobs: list[float] = []
    for record in records:
        new = record.prompt_tokens[len(tokens) :]
        tokens += [*new, *record.sampled_tokens]
        logprobs += [0.0] * len(new) + list(record.sampled_logprobs)
    return (
        np.asarray(tokens[1:], dtype=np.int64).tobytes(),
        np.asarray(logprobs[1:], dtype=np.float32).tobytes(),
    )


def test_an_agents_sdk_agent_with_a_function_tool_trains_on_its_records(monkeypatch: Any) -> None:
    from kitchen.serve.gateway.gateway import Gateway

    example = load_example("agents_sdk_rl")
    taken: dict[str, list[Any]] = {}
    trained: list[Any] = []
    take, forward_backward = Gateway.take, FakeTrainingClient.forward_backward

    def recording_take(self: Any, address: str) -> list[Any]:
        taken[address] = take(self, address)
        return taken[address]

    def capturing(self: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        trained.extend(data)
        return forward_backward(self, data, *args, **kwargs)

    monkeypatch.setattr(Gateway, "take", recording_take)
    monkeypatch.setattr(FakeTrainingClient, "forward_backward", capturing)
    backend = FakeBackend(responder=_tool_then_answer)
    result = run_workflow(example.build_workflow(), backend=backend)
    assert result.steps == 2 and len(taken) == 8
    for records in taken.values():
        assert len(records) == 2 and records[1].extends_previous  # the tool call, then the answer
    tokenizer = backend.tokenizer
    second_prompts = [tokenizer.decode(list(r[1].prompt_tokens)) for r in taken.values()]
    assert all(
        "<tool_response>" in p or "tool" in p.split("</tool_call>")[-1] for p in second_prompts
    )
    assert Counter(
        (
            d.loss_fn_inputs["target_tokens"].to_numpy().astype(np.int64).tobytes(),
            d.loss_fn_inputs["logprobs"].to_numpy().astype(np.float32).tobytes(),
        )
        for d in trained
    ) == Counter(_episode(r) for r in taken.values())
    steps = [m for m in result.metrics if "agents/calls" in m]
    # the SDK ran the tool; the answer read from its result is right
    assert [m["env/all/reward/total"] for m in steps] == [1.0, 1.0]
    assert [m["agents/tool_calls"] for m in steps] == [4.0, 4.0]  # one per rollout
