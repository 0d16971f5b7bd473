"""The gateway's record: every call addressed to a rollout, in a CallLog, and per rollout the last
chat call (what the next call may extend, turns.py)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from kitchen.serve.gateway.turns import ChatTurn, Sampled, next_prompt
from train_core.agents import CallLog, CallRecord


class RolloutBook:
    """Calls by rollout address. Thread-safe: HTTP handlers and in-process clients share it."""

    def __init__(self) -> None:
        self.log = CallLog()
        self._lock = threading.Lock()
        self._last_chat: dict[str, Sampled] = {}

    def calls(self, address: str) -> RolloutCalls:
        """The recorder a call addressed to `address` records through."""
        return RolloutCalls(address, self)

    def take(self, address: str) -> list[CallRecord]:
        """The address's calls, in order, removed (and what its next call would have extended)."""
        with self._lock:
            self._last_chat.pop(address, None)
        return self.log.take(address)

    def peek(self, address: str) -> list[CallRecord]:
        return self.log.calls(address)

    def addresses(self) -> list[str]:
        return self.log.addresses()

    def last_chat(self, address: str) -> Sampled | None:
        with self._lock:
            return self._last_chat.get(address)

    def _after_chat(self, address: str, sampled: Sampled) -> None:
        with self._lock:
            self._last_chat[address] = sampled


class RolloutCalls:
    """kitchen.serve.openai.models.CallRecorder for one address."""

    def __init__(self, address: str, book: RolloutBook) -> None:
        self.address = address
        self._book = book

    def chat_turn(
        self,
        renderer: Any,
        tools: list[dict[str, Any]] | None,
        messages: list[Any],
        conversation: list[Any],
        fresh: list[int],
    ) -> ChatTurn:
        previous = self._book.last_chat(self.address)
        return next_prompt(renderer, previous, tools, messages, conversation, fresh)

    def record(
        self,
        prompt: Sequence[int],
        tokens: Sequence[int],
        logprobs: Sequence[float],
        stop_reason: str,
        version: int,
        turn: Any = None,
        reply: dict[str, Any] | None = None,
    ) -> None:
        self._book.log.add(
            self.address,
            prompt_tokens=prompt,
            sampled_tokens=tokens,
            sampled_logprobs=logprobs,
            stop_reason=stop_reason,
            sampler_version=version,
        )
        if isinstance(turn, ChatTurn) and reply is not None:
            from kitchen.serve.openai.chat import to_message

            sampled = Sampled(turn, tuple(tokens), to_message(reply, "reply"))
            self._book._after_chat(self.address, sampled)
