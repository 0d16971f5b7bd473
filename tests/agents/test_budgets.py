"""A rollout's budgets as the gateway spends them call by call (train_core.agents.budgets): turns
and tokens admitted before sampling, tokens reserved so parallel calls cannot pass the budget
together, tool calls settled from the reply, and the first refusal kept."""

from __future__ import annotations

import pytest

from train_core.agents.budgets import BudgetExceeded, RolloutMeter


def _refused(meter: RolloutMeter, max_tokens: int | None = 4) -> str:
    with pytest.raises(BudgetExceeded) as caught:
        meter.admit(max_tokens)
    return caught.value.refusal.budget


def test_the_turn_past_the_budget_is_refused_and_every_call_after_it() -> None:
    meter = RolloutMeter("r", max_turns=2)
    for _ in range(2):
        meter.settle(meter.admit(4), 4, 0)
    assert _refused(meter) == "max_turns"
    assert meter.refusal is not None and meter.refusal.kind == "over_turns"
    assert "turn budget of 2" in meter.refusal.message
    assert _refused(meter) == "max_turns"  # the rollout stays refused
    assert meter.turns == 2


def test_max_tokens_is_capped_to_what_is_left_and_reserved_while_in_flight() -> None:
    meter = RolloutMeter("r", max_sampled_tokens=10)
    first = meter.admit(6)
    second = meter.admit(6)  # 6 are reserved by the first, in flight
    assert (first.max_tokens, second.max_tokens) == (6, 4)
    assert _refused(meter, None) == "max_sampled_tokens"
    assert meter.refusal is not None and meter.refusal.kind == "over_sampled_tokens"

    fresh = RolloutMeter("r", max_sampled_tokens=10)
    call = fresh.admit(6)
    fresh.settle(call, 2, 0)  # it stopped early: its unsampled 4 are free again
    assert fresh.admit(None).max_tokens == 8  # no limit asked: what is left
    assert fresh.sampled_tokens == 2


def test_a_call_that_ends_without_settling_gives_its_turn_and_tokens_back() -> None:
    meter = RolloutMeter("r", max_turns=1, max_sampled_tokens=5)
    call = meter.admit(5)
    meter.cancel(call)
    meter.cancel(call)  # once only
    assert meter.turns == 0
    assert meter.admit(5).max_tokens == 5


def test_the_reply_whose_tool_calls_pass_the_budget_is_refused() -> None:
    meter = RolloutMeter("r", max_tool_calls=2)
    meter.settle(meter.admit(None), 3, 1)
    meter.settle(meter.admit(None), 3, 1)
    with pytest.raises(BudgetExceeded, match="tool call 3, past its budget of 2"):
        meter.settle(meter.admit(None), 3, 1)
    assert meter.refusal is not None and meter.refusal.kind == "over_tool_calls"
    assert (meter.tool_calls, _refused(meter)) == (3, "max_tool_calls")


def test_without_budgets_nothing_is_refused_and_everything_counted() -> None:
    meter = RolloutMeter("r")
    for _ in range(50):
        meter.settle(meter.admit(None), 7, 2)
    assert (meter.turns, meter.sampled_tokens, meter.tool_calls, meter.refusal) == (
        50,
        350,
        100,
        None,
    )
