"""A rollout's turn, sampled-token and tool-call budgets, spent while it runs.

The gateway keeps one RolloutMeter per rollout address and asks it about every call on it: before
sampling (`admit`: a turn, and the tokens the call may sample, capped to what is left) and once
sampled (`settle`: the tokens it sampled and the tool calls of its reply). A call that would go
past a budget is refused (BudgetExceeded) and the meter keeps the first refusal: from then on every
call on the address is refused, and the RL seam drops the rollout under that budget's kind.

Tokens are reserved when a call is admitted (its capped max_tokens) and the reservation replaced
by what it sampled when it settles, so calls made in parallel cannot together sample past the
budget. A call that ends without settling (it failed, or its client went away) gives its turn and
reservation back (`cancel`). Thread-safe: the gateway's HTTP thread and the rollouts share it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Literal

BudgetKind = Literal["over_turns", "over_sampled_tokens", "over_tool_calls"]


@dataclass(frozen=True)
class Refusal:
    """Why a rollout's call was refused: the budget's kind, its name and one line."""

    kind: BudgetKind
    budget: str
    """The budget's own name: "max_turns", "max_sampled_tokens" or "max_tool_calls"."""
    message: str


class BudgetExceeded(Exception):
    """A call the rollout's budget does not allow."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


@dataclass
class Admission:
    """One admitted call: the tokens it may sample (None: no limit) and what it holds."""

    max_tokens: int | None
    reserved: int
    open: bool = True


class RolloutMeter:
    """One rollout's budgets (None: no limit) and what its calls have spent of them."""

    def __init__(
        self,
        address: str,
        max_turns: int | None = None,
        max_sampled_tokens: int | None = None,
        max_tool_calls: int | None = None,
    ) -> None:
        self.address = address
        self.max_turns = max_turns
        self.max_sampled_tokens = max_sampled_tokens
        self.max_tool_calls = max_tool_calls
        self.turns = 0
        """Calls admitted: in flight or settled."""
        self.sampled_tokens = 0
        """Tokens the settled calls sampled."""
        self.tool_calls = 0
        """Tool calls in the settled calls' replies."""
        self.refusal: Refusal | None = None
        """The first call refused, if any: the rollout is over that budget."""
        self._reserved = 0
        self._lock = threading.Lock()

    def admit(self, max_tokens: int | None) -> Admission:
        """A turn for one call, which may sample `max_tokens` capped to the tokens left; raises
        BudgetExceeded when no turn or no token is left, or the rollout was refused before."""
        with self._lock:
            if self.refusal is not None:
                raise BudgetExceeded(self._again())
            if self.max_turns is not None and self.turns >= self.max_turns:
                raise self._refuse(
                    "over_turns",
                    "max_turns",
                    f"a call past its turn budget of {self.max_turns} calls",
                )
            cap = max_tokens
            if self.max_sampled_tokens is not None:
                left = self.max_sampled_tokens - self.sampled_tokens - self._reserved
                if left <= 0:
                    raise self._refuse(
                        "over_sampled_tokens",
                        "max_sampled_tokens",
                        f"a call with no tokens left of its budget of {self.max_sampled_tokens}",
                    )
                cap = left if max_tokens is None else min(max_tokens, left)
            self.turns += 1
            self._reserved += cap if self.max_sampled_tokens is not None and cap else 0
            return Admission(cap, cap if self.max_sampled_tokens is not None and cap else 0)

    def settle(self, admission: Admission | None, sampled: int, tool_calls: int) -> None:
        """The call sampled `sampled` tokens and its reply made `tool_calls` tool calls; raises
        BudgetExceeded (and the reply is not to be returned) when they go past the tool-call
        budget. `admission` None: a call that was not admitted first (it takes its turn now)."""
        with self._lock:
            if admission is None:
                self.turns += 1
            else:
                self._close(admission)
            self.sampled_tokens += sampled
            self.tool_calls += tool_calls
            if self.max_tool_calls is not None and self.tool_calls > self.max_tool_calls:
                if self.refusal is not None:
                    raise BudgetExceeded(self._again())
                raise self._refuse(
                    "over_tool_calls",
                    "max_tool_calls",
                    f"a reply making tool call {self.tool_calls}, past its budget of "
                    f"{self.max_tool_calls}",
                )

    def cancel(self, admission: Admission) -> None:
        """An admitted call that ends without settling gives its turn and tokens back."""
        with self._lock:
            if admission.open:
                self._close(admission)
                self.turns -= 1

    def _close(self, admission: Admission) -> None:
        if admission.open:
            admission.open = False
            self._reserved -= admission.reserved

    def _refuse(self, kind: BudgetKind, budget: str, what: str) -> BudgetExceeded:
        message = f"{what} ({budget}); the rollout is dropped"
        self.refusal = Refusal(kind, budget, message)
        return BudgetExceeded(self.refusal)

    def _again(self) -> Refusal:
        assert self.refusal is not None
        first = self.refusal
        return Refusal(first.kind, first.budget, f"{first.message} (refused before)")
