"""What the agent gateway records of every sampling call, by rollout address.

An address names one rollout (one episode of one agent): every call the agent makes with the
client it was handed is recorded under it, in order. The trainer builds that rollout's datums from
these records alone, never from re-tokenized text.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CallRecord:
    """One sampling call: the exact prompt the sampler saw and what it sampled."""

    address: str
    turn: int
    """Position among the address's calls: 0 for the first."""
    prompt_tokens: tuple[int, ...]
    sampled_tokens: tuple[int, ...]
    sampled_logprobs: tuple[float, ...]
    """The sampler's own logprob of each sampled token, at the request's temperature."""
    stop_reason: str
    """Tinker's stop reason: "stop" (a stop sequence or end of turn) or "length"."""
    sampler_version: int
    """The policy version of the weights that sampled (the step that saved them)."""
    extends_previous: bool
    """The prompt starts with the previous call's prompt + sampled tokens, so both calls train as
    one datum; False for the first call and wherever the chat format could not extend."""

    def __post_init__(self) -> None:
        if len(self.sampled_tokens) != len(self.sampled_logprobs):
            raise ValueError(
                f"call {self.address!r}#{self.turn}: {len(self.sampled_tokens)} sampled tokens "
                f"but {len(self.sampled_logprobs)} logprobs; expected one logprob per token"
            )


def extends(previous: CallRecord | None, prompt_tokens: Sequence[int]) -> bool:
    """Whether `prompt_tokens` continues `previous`'s prompt and sampled tokens exactly."""
    if previous is None:
        return False
    head = (*previous.prompt_tokens, *previous.sampled_tokens)
    return len(prompt_tokens) >= len(head) and tuple(prompt_tokens[: len(head)]) == head


class CallLog:
    """Every address's calls, in call order. Thread-safe: HTTP handlers and rollouts share it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: defaultdict[str, list[CallRecord]] = defaultdict(list)

    def add(
        self,
        address: str,
        *,
        prompt_tokens: Sequence[int],
        sampled_tokens: Sequence[int],
        sampled_logprobs: Sequence[float],
        stop_reason: str,
        sampler_version: int,
    ) -> CallRecord:
        """Record one call under `address` and return its record (turn and extension derived)."""
        with self._lock:
            calls = self._calls[address]
            record = CallRecord(
                address=address,
                turn=len(calls),
                prompt_tokens=tuple(prompt_tokens),
                sampled_tokens=tuple(sampled_tokens),
                sampled_logprobs=tuple(float(x) for x in sampled_logprobs),
                stop_reason=stop_reason,
                sampler_version=sampler_version,
                extends_previous=extends(calls[-1] if calls else None, prompt_tokens),
            )
            calls.append(record)
            return record

    def last(self, address: str) -> CallRecord | None:
        """The address's latest call, if any."""
        with self._lock:
            calls = self._calls.get(address)
            return calls[-1] if calls else None

    def calls(self, address: str) -> list[CallRecord]:
        """The address's calls so far, in order (a copy)."""
        with self._lock:
            return list(self._calls.get(address, ()))

    def take(self, address: str) -> list[CallRecord]:
        """The address's calls, in order, removed from the log: a finished rollout's record."""
        with self._lock:
            return self._calls.pop(address, [])

    def addresses(self) -> list[str]:
        with self._lock:
            return list(self._calls)
