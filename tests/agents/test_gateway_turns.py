"""The multi-turn rule on replies the tiny model would not write by itself: a tool call, and
thinking that a format drops from history. A scripted sampling client (the port's surface: it
reports no tokens while sampling, as a hosted one) answers with fixed tokens; the gateway, the
chat format and the openai client are the real ones."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from tinker import types

from kitchen.engine.futures import APIFuture
from kitchen.serve.gateway import open_gateway
from tests.agents.helpers import two_tool_turns
from train_core.renderers import get_renderer
from train_core.renderers.base import encode_without_special_tokens

pytest.importorskip("openai", reason="the openai client: pip install 'kitchen[eval]'")
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]
CALL = '<tool_call>\n{"name": "weather", "arguments": {"city": "Paris"}}\n</tool_call>'


class ScriptedSampler:
    """Answers every sample with the next reply of `replies` (text, ended by <|im_end|>)."""

    def __init__(self, tokenizer: Any, replies: list[str]) -> None:
        self.tokenizer = tokenizer
        end = encode_without_special_tokens(tokenizer, "<|im_end|>")
        self._replies = [encode_without_special_tokens(tokenizer, r) + end for r in replies]
        self.prompts: list[list[int]] = []

    def sample(
        self, prompt: types.ModelInput, num_samples: int, sampling_params: Any, **_: Any
    ) -> APIFuture[types.SampleResponse]:
        self.prompts.append(prompt.to_ints())
        tokens = self._replies.pop(0)
        logprobs = [-0.25 - i / 100 for i in range(len(tokens))]
        sequence = types.SampledSequence(
            stop_reason="stop",
            sequence_id="scripted",
            tokens_np=np.asarray(tokens, dtype=np.int32),
            logprobs_np=np.asarray(logprobs, dtype=np.float32),
        )
        return APIFuture.completed(types.SampleResponse(sequences=[sequence]))

    def get_tokenizer(self) -> Any:
        return self.tokenizer

    def get_base_model(self) -> str:
        return "kitchen/tiny-llama"


@pytest.fixture(scope="module")
def tokenizer():  # type: ignore[no-untyped-def]
    import transformers

    from kitchen.adapters.local.model.locate import resolve_model

    return transformers.AutoTokenizer.from_pretrained(str(resolve_model("kitchen/tiny-llama")))


async def _two_turns(client: Any, first_user: str) -> list[Any]:
    messages = [{"role": "user", "content": first_user}]
    return await two_tool_turns(
        client, messages, TOOLS, tool_result="rain", nudge="And tomorrow?", max_tokens=64
    )


def test_a_tool_call_reply_and_its_result_extend_the_prompt(tokenizer) -> None:
    sampler = ScriptedSampler(tokenizer, [CALL, "It rains in Paris."])
    with open_gateway(policy=sampler, version=1, renderer="chatml") as gateway:
        first, second = asyncio.run(_two_turns(gateway.client("tool"), "Weather in Paris?"))
        records = gateway.take("tool")
    call = first.choices[0].message.tool_calls[0]
    assert (call.function.name, first.choices[0].finish_reason) == ("weather", "tool_calls")
    assert [r.extends_previous for r in records] == [False, True]
    head = [*records[0].prompt_tokens, *records[0].sampled_tokens]
    assert sampler.prompts[1][: len(head)] == head == second.prompt_token_ids[: len(head)]
    # What follows the sampled reply is the tool result as the format renders it.
    assert "rain" in tokenizer.decode(sampler.prompts[1][len(head) :])
    expected = [-0.25 - i / 100 for i in range(len(records[1].sampled_tokens))]
    assert list(records[1].sampled_logprobs) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    ("renderer", "strip", "extends"),
    [("chatml", None, True), ("qwen3", True, False), ("qwen3", False, True)],
)
def test_thinking_dropped_from_history_splits_the_episode(
    tokenizer, renderer, strip, extends
) -> None:
    """chatml, and qwen3 told to keep it, keep a reply's <think> block in history: turn 2
    extends turn 1. qwen3 drops it there by default, so the render of turn 2 does not continue
    what was sampled: a fresh render, counted as a split (extends_previous False), never a silent
    re-tokenization."""
    from train_core.renderers.qwen3 import Qwen3Renderer

    chat = get_renderer(renderer, tokenizer) if strip is None else Qwen3Renderer(tokenizer, strip)
    replies = ["<think>It is spring.</think>Mild.", "<think>Later.</think>Rain."]
    with open_gateway(policy=ScriptedSampler(tokenizer, replies), version=1, renderer=chat) as g:
        asyncio.run(_two_turns(g.client("think"), "Weather?"))
        records = g.take("think")
    assert [r.extends_previous for r in records] == [False, extends]
    assert ("It is spring" in tokenizer.decode(list(records[1].prompt_tokens))) is extends
