"""examples/agents_sdk_rl.py: an OpenAI Agents SDK agent with a function tool, trained through the
run's gateway (in-process client). On the fake backend, whose sampler here calls the tool and
then answers from its result, each episode is two calls, the SDK's own tool round trip between
them, and trains as one datum equal to the gateway's records byte for byte."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from kitchen.adapters.fake import FakeBackend
from kitchen.adapters.fake.backend import FakeTrainingClient
from kitchen.app.launch import run_workflow
from tests.agents.helpers import (
    episode_datum,
    record_gateway_takes,
    trained_datum,
)
from tests.examples.helpers import load_example
from tests.helpers import record_forward_backward, sent_datums

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


def test_an_agents_sdk_agent_with_a_function_tool_trains_on_its_records(monkeypatch: Any) -> None:
    example = load_example("agents_sdk_rl")
    taken = record_gateway_takes(monkeypatch)
    calls = record_forward_backward(monkeypatch, FakeTrainingClient)
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
    trained = sent_datums(calls)
    assert Counter(map(trained_datum, trained)) == Counter(map(episode_datum, taken.values()))
    steps = [m for m in result.metrics if "agents/calls" in m]
    # the SDK ran the tool; the answer read from its result is right
    assert [m["env/all/reward/total"] for m in steps] == [1.0, 1.0]
    assert [m["agents/tool_calls"] for m in steps] == [4.0, 4.0]  # one per rollout
