"""What the agent gateway records of every sampling call, by rollout address.

An address names one rollout (one episode of one agent): every call the agent makes with the
client it was handed is recorded under it, in the order the calls started (a call gets its start
number when it arrives, `CallLog.start`; one that finishes before an earlier one is recorded after
it all the same). The trainer builds that rollout's datums from
these records alone, never from re-tokenized text.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class CallRecord:
    """One sampling call: the exact prompt the sampler saw and what it sampled."""

    address: str
    turn: int
    """Position among the address's recorded calls, in the order they started: 0 for the first."""
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
    started: int = 0
    """The call's start number on its address (0 first; a call refused or failed before it was
    recorded leaves a gap). Records written before it was kept read as 0."""

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
    """Every address's calls, in the order they started. Thread-safe: HTTP handlers and rollouts
    share it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: defaultdict[str, list[CallRecord]] = defaultdict(list)
        self._started: defaultdict[str, int] = defaultdict(int)

    def start(self, address: str) -> int:
        """The next start number on `address`: a call takes one when it arrives, and its record
        goes where that number puts it among the address's calls."""
        with self._lock:
            number = self._started[address]
            self._started[address] = number + 1
            return number

    def add(
        self,
        address: str,
        *,
        prompt_tokens: Sequence[int],
        sampled_tokens: Sequence[int],
        sampled_logprobs: Sequence[float],
        stop_reason: str,
        sampler_version: int,
        started: int | None = None,
    ) -> CallRecord:
        """Record one call under `address` and return its record (turn and extension derived).
        `started`: its start number (`start`); None: it starts now. A call that started before
        calls already recorded goes before them: their turns and extensions are derived again."""
        if started is None:
            started = self.start(address)
        with self._lock:
            calls = self._calls[address]
            at = len(calls)
            while at and calls[at - 1].started > started:
                at -= 1
            record = CallRecord(
                address=address,
                turn=at,
                prompt_tokens=tuple(prompt_tokens),
                sampled_tokens=tuple(sampled_tokens),
                sampled_logprobs=tuple(float(x) for x in sampled_logprobs),
                stop_reason=stop_reason,
                sampler_version=sampler_version,
                extends_previous=extends(calls[at - 1] if at else None, prompt_tokens),
                started=started,
            )
            calls.insert(at, record)
            for i in range(at + 1, len(calls)):
                later = calls[i]
                calls[i] = replace(
                    later, turn=i, extends_previous=extends(calls[i - 1], later.prompt_tokens)
                )
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
        """The address's calls, in order, removed from the log: a finished rollout's record
        (and its start numbers: a later call on the address starts at 0 again)."""
        with self._lock:
            self._started.pop(address, None)
            return self._calls.pop(address, [])

    def addresses(self) -> list[str]:
        with self._lock:
            return list(self._calls)
