"""A test double of the AgentGateway port (kitchen/ports/agents.py), not the gateway: an
`openai.AsyncOpenAI` per address whose HTTP transport is an in-process handler of
`/v1/chat/completions` over the current sampling client, recording every call in a CallLog.

Its chat format is the simplest that extends: each message is `<role>` + its tokens, and an
assistant message the double itself answered is its sampled tokens again, so a turn whose messages
extend the previous turn's plus its reply has a prompt that extends the previous prompt + reply.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
from tinker import types

from train_core.agents import CallLog
from train_core.futures import resolve_future


class GatewayDouble:
    def __init__(self, hang_on: str | None = None, tool_on: str | None = None) -> None:
        self.log = CallLog()
        self.sampler: Any = None
        self.version = -1
        self.versions_set: list[int] = []
        self.hang_on = hang_on  # a message content that makes the double never answer
        self.tool_on = tool_on  # a last message content the double answers with a tool call
        self._replies: dict[tuple[str, str], tuple[int, ...]] = {}  # (address, text) -> tokens

    # the AgentGateway port
    def client(self, address: str) -> openai.AsyncOpenAI:
        async def handle(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, json=await self._chat(address, json.loads(request.content)))

        transport = httpx.MockTransport(handle)
        return openai.AsyncOpenAI(
            api_key="test",
            base_url="http://gateway.test/v1",
            http_client=httpx.AsyncClient(transport=transport),
            max_retries=0,
        )

    def base_url(self, address: str) -> str | None:
        return None

    def set_policy(self, sampling_client: Any, version: int, base_model: str | None = None) -> None:
        self.sampler, self.version = sampling_client, version
        self.versions_set.append(version)

    def take(self, address: str) -> list[Any]:
        return self.log.take(address)

    def live_snapshots(self) -> int:
        return 1

    # the route
    async def _chat(self, address: str, body: dict[str, Any]) -> dict[str, Any]:
        tokenizer = self.sampler.get_tokenizer()
        prompt: list[int] = []
        for message in body["messages"]:
            content = message.get("content") or ""
            if content == self.hang_on:
                await asyncio.Event().wait()
            prompt += tokenizer.encode(f"<{message['role']}>", add_special_tokens=False)
            known = (
                self._replies.get((address, content)) if message["role"] == "assistant" else None
            )
            prompt += (
                list(known)
                if known is not None
                else tokenizer.encode(content, add_special_tokens=False)
            )
        prompt += tokenizer.encode("<assistant>", add_special_tokens=False)
        params = types.SamplingParams(
            max_tokens=body.get("max_tokens") or 16, temperature=body.get("temperature", 1.0)
        )
        response = await resolve_future(
            self.sampler.sample(types.ModelInput.from_ints(prompt), 1, params)
        )
        sequence = response.sequences[0]
        tokens = list(sequence.tokens)
        record = self.log.add(
            address,
            prompt_tokens=prompt,
            sampled_tokens=tokens,
            sampled_logprobs=list(sequence.logprobs or []),
            stop_reason=sequence.stop_reason,
            sampler_version=self.version,
        )
        text = tokenizer.decode(tokens, skip_special_tokens=True)
        self._replies[(address, text)] = record.sampled_tokens
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if self.tool_on is not None and body["messages"][-1].get("content") == self.tool_on:
            call = {"name": "calculator", "arguments": '{"expression": "1 + 1"}'}
            message["tool_calls"] = [
                {"id": f"call_{record.turn}", "type": "function", "function": call}
            ]
        return {
            "id": f"chat-{address}-{record.turn}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": sequence.stop_reason,
                }
            ],
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(tokens),
                "total_tokens": len(prompt) + len(tokens),
            },
        }
