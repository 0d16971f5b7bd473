"""The gateway's record: every call addressed to a rollout, in a CallLog, in the order the calls
started; per rollout the last chat call (what the next call may extend, turns.py) and, where the
rollout has budgets (`limit`), its RolloutMeter, which every call on it is admitted and settled by
(train_core/agents/budgets.py)."""

from __future__ import annotations

import threading
from typing import Any

from kitchen.serve.errors import UserError
from kitchen.serve.gateway.turns import ChatTurn, Sampled, next_prompt
from kitchen.serve.openai.models import ChatPrompt, SampledCall
from train_core.agents import CallLog, CallRecord
from train_core.agents.budgets import Admission, BudgetExceeded, Refusal, RolloutMeter

BUDGET_ERROR_CODE = "rollout_budget_exceeded"
"""The `code` of the error a call past its rollout's budget is answered with."""


class RolloutBudgetExceeded(UserError):
    """A call past its rollout's budget: HTTP 400 (not 429, which OpenAI clients retry), `code`
    rollout_budget_exceeded, `param` the budget's name."""

    code = BUDGET_ERROR_CODE

    def __init__(self, address: str, refusal: Refusal) -> None:
        super().__init__(f"rollout {address!r}: {refusal.message}")
        self.param = refusal.budget


class RolloutBook:
    """Calls by rollout address. Thread-safe: HTTP handlers and in-process clients share it."""

    def __init__(self) -> None:
        self.log = CallLog()
        self._lock = threading.Lock()
        self._last_chat: dict[str, Sampled] = {}
        self._meters: dict[str, RolloutMeter] = {}

    def calls(self, address: str) -> RolloutCalls:
        """The recorder a call addressed to `address` records through; the call starts now."""
        with self._lock:
            meter = self._meters.get(address)
        return RolloutCalls(address, self, self.log.start(address), meter)

    def limit(self, meter: RolloutMeter) -> None:
        """From now on the calls on `meter.address` spend its budgets."""
        with self._lock:
            self._meters[meter.address] = meter

    def take(self, address: str) -> list[CallRecord]:
        """The address's calls, in order, removed (with what its next call would have extended,
        and its budgets)."""
        with self._lock:
            self._last_chat.pop(address, None)
            self._meters.pop(address, None)
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
    """kitchen.serve.openai.models.CallRecorder for one call on one address."""

    def __init__(
        self, address: str, book: RolloutBook, started: int, meter: RolloutMeter | None
    ) -> None:
        self.address = address
        self.started = started
        self._book = book
        self._meter = meter
        self._admission: Admission | None = None

    def admit(self, max_tokens: int | None) -> int | None:
        if self._meter is None:
            return max_tokens
        try:
            self._admission = self._meter.admit(max_tokens)
        except BudgetExceeded as e:
            raise RolloutBudgetExceeded(self.address, e.refusal) from None
        return self._admission.max_tokens

    def close(self) -> None:
        """The call is over: if it was admitted and recorded nothing, its budget is given back."""
        if self._meter is not None and self._admission is not None:
            self._meter.cancel(self._admission)

    def chat_turn(self, renderer: Any, rendered: ChatPrompt) -> ChatTurn:
        return next_prompt(renderer, self._book.last_chat(self.address), rendered)

    def record(self, call: SampledCall) -> None:
        if self._meter is not None:
            tool_calls = len((call.reply or {}).get("tool_calls") or ())
            try:
                self._meter.settle(self._admission, len(call.choice.tokens), tool_calls)
            except BudgetExceeded as e:
                raise RolloutBudgetExceeded(self.address, e.refusal) from None
        self._book.log.add(
            self.address,
            prompt_tokens=call.prompt,
            sampled_tokens=call.choice.tokens,
            sampled_logprobs=call.choice.logprobs,
            stop_reason=call.choice.stop_reason,
            sampler_version=call.version,
            started=self.started,
        )
        if isinstance(call.turn, ChatTurn) and call.reply is not None:
            from kitchen.serve.openai.chat import to_message

            sampled = Sampled(call.turn, tuple(call.choice.tokens), to_message(call.reply, "reply"))
            self._book._after_chat(self.address, sampled)
