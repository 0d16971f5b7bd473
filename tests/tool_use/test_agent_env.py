"""The generic tool env: budgets, the parse-error and termination policies, the reward at the
end, and tool lifetimes."""

from __future__ import annotations

import asyncio
import json

import pytest

from kitchen.adapters.fake.tokenizer import FakeTokenizer
from train_core.renderers import get_renderer
from train_core.renderers.types import Message, ToolCall, UnparsedToolCall
from train_core.tool_use import (
    AgentToolEnv,
    AgentToolGroupBuilder,
    AgentToolMessageEnv,
    ParseErrorPolicy,
    TerminationPolicy,
    ToolBudget,
    ToolProvider,
    agent_tool_env,
    text_result,
    tool,
    tool_conversation,
)

PROMPT: list[Message] = [{"role": "user", "content": "What is the code word?"}]


def run(coro):
    return asyncio.run(coro)


class Lookup:
    """A tool with state: counts its calls; `stop` ends the episode."""

    def __init__(self) -> None:
        self.calls = 0
        self.closed = False

    @tool
    async def lookup(self, key: str) -> object:
        """Look a key up."""
        self.calls += 1
        if key == "stop":
            return text_result("bye", should_stop=True, metrics={"hits": 0.0})
        return text_result(f"value of {key}", metrics={"hits": 1.0})

    async def aclose(self) -> None:
        self.closed = True


def said(text: str, *keys: str) -> Message:
    calls = [ToolCall(id=f"c{i}", function=ToolCall.FunctionBody(name="lookup", arguments=json.dumps({"key": k})))
             for i, k in enumerate(keys)]  # fmt: skip
    return {"role": "assistant", "content": text, "tool_calls": calls}


def broken() -> Message:
    return {"role": "assistant", "content": "", "unparsed_tool_calls": [UnparsedToolCall(raw_text="{", error="bad JSON")]}  # fmt: skip


async def says_ok(messages: list[Message]) -> tuple[float, dict[str, float]]:
    return float(messages[-1]["content"] == "ok"), {"graded_messages": float(len(messages))}


def env(**kw):
    lookup = Lookup()
    kw.setdefault("budget", ToolBudget(max_turns=4))
    return lookup, AgentToolMessageEnv([lookup.lookup], PROMPT, says_ok, **kw)


def test_tool_turns_earn_zero_and_the_answer_turn_is_graded_with_the_whole_conversation():
    lookup, e = env()
    run(e.initial_observation())
    first = run(e.step(said("", "a", "b")))
    assert (first.reward, first.episode_done, first.metrics["tool_calls"]) == (0.0, False, 2.0)
    assert first.metrics["tool/hits"] == 2.0
    assert [m["content"] for m in first.next_messages[-2:]] == ["value of a", "value of b"]
    last = run(e.step(said("ok")))
    assert last.episode_done and last.reward == 1.0 and last.metrics["stop/completed"] == 1.0
    assert last.metrics["graded_messages"] == 5.0 and lookup.calls == 2


def test_calls_on_the_last_turn_are_not_run_and_the_episode_is_graded_as_max_turns():
    lookup, e = env(budget=ToolBudget(max_turns=1))
    run(e.initial_observation())
    result = run(e.step(said("ok", "a")))
    assert result.metrics["stop/max_turns"] == 1.0 and lookup.calls == 0


def test_the_tool_call_budget_runs_the_allowed_prefix_then_stops():
    lookup, e = env(budget=ToolBudget(max_turns=5, max_tool_calls=3))
    run(e.initial_observation())
    assert not run(e.step(said("", "a", "b"))).episode_done
    result = run(e.step(said("", "c", "d")))
    assert result.episode_done and result.metrics["stop/max_tool_calls"] == 1.0
    assert lookup.calls == 3 and result.metrics["tool_calls"] == 1.0


def test_a_tool_may_end_the_episode():
    _, e = env()
    run(e.initial_observation())
    result = run(e.step(said("", "stop")))
    assert result.episode_done and result.metrics["stop/tool_stopped"] == 1.0


def test_without_a_policy_a_parse_failure_costs_failed_parse_reward_and_ends_or_continues():
    _, ends = env(failed_parse_reward=-0.3)
    run(ends.initial_observation())
    r = run(ends.step(broken()))
    assert (r.reward, r.episode_done, r.metrics["stop/parse_error"]) == (-0.3, True, 1.0)
    _, goes_on = env(terminate_on_parse_error=False)
    run(goes_on.initial_observation())
    assert not run(goes_on.step(broken())).episode_done


def test_the_parse_error_policy_retries_with_a_message_then_ends_with_its_terminal_reward():
    policy = ParseErrorPolicy(max_consecutive=1, penalty_per_error=0.2, terminal_reward=-1.0)
    _, e = env(parse_errors=policy)
    run(e.initial_observation())
    retry = run(e.step(broken()))
    assert (retry.reward, retry.episode_done) == (-0.2, False)
    assert retry.next_messages[-1] == {"role": "user", "content": "The previous message had a formatting issue.\nError: bad JSON"}  # fmt: skip
    assert not run(e.step(said("", "a"))).episode_done  # a clean turn resets the count
    assert run(e.step(broken())).reward == -0.2
    final = run(e.step(broken()))
    assert (final.reward, final.episode_done, final.metrics["stop/parse_error"]) == (
        -1.0,
        True,
        1.0,
    )


def test_grade_then_clamp_keeps_a_negative_grade_and_removes_a_positive_one_at_a_limit():
    async def bad(messages):
        return -0.5, {}

    clamp = TerminationPolicy(zero_reward_on_limit=True)
    _, e = env(budget=ToolBudget(max_turns=1), termination=clamp)
    run(e.initial_observation())
    assert run(e.step(said("ok", "a"))).reward == 0.0  # graded 1, stopped by max_turns
    e2 = AgentToolMessageEnv([], PROMPT, bad, ToolBudget(max_turns=1), termination=clamp)
    run(e2.initial_observation())
    assert run(e2.step(said("ok", "a"))).reward == -0.5
    _, e3 = env(termination=clamp)
    run(e3.initial_observation())
    assert run(e3.step(said("ok"))).reward == 1.0  # completed: no clamp


def test_a_failing_or_slow_grader_is_a_counted_reward_when_the_policy_bounds_it():
    async def slow(messages):
        await asyncio.sleep(5)
        return 1.0, {}

    async def raises(messages):
        raise ConnectionError("grader down")

    bounded = TerminationPolicy(grader_timeout_s=0.05, grader_failure_reward=0.0)
    for grader in (slow, raises):
        e = AgentToolMessageEnv([], PROMPT, grader, termination=bounded)
        run(e.initial_observation())
        result = run(e.step(said("ok")))
        assert (result.reward, result.metrics["grader_failed"]) == (0.0, 1.0)
    unbounded = AgentToolMessageEnv([], PROMPT, raises)
    run(unbounded.initial_observation())
    with pytest.raises(ConnectionError):
        run(unbounded.step(said("ok")))


def test_the_grader_may_see_only_what_the_episode_added():
    _, e = env(termination=TerminationPolicy(grade_whole_conversation=False))
    run(e.initial_observation())
    assert run(e.step(said("ok"))).metrics["graded_messages"] == 1.0


TOKENIZER = FakeTokenizer()
RENDERER = get_renderer("chatml", TOKENIZER)


def token_env(budget: ToolBudget) -> AgentToolEnv:
    lookup = Lookup()
    messages = tool_conversation(RENDERER, [lookup.lookup], PROMPT)
    return agent_tool_env(RENDERER, [lookup.lookup], messages, says_ok, budget=budget)


def reply(text: str) -> list[int]:
    return TOKENIZER.encode(text + "<|im_end|>")


CALL = '<tool_call>\n{"name": "lookup", "arguments": {"key": "a"}}\n</tool_call>'


def test_the_token_env_declares_the_tools_and_parses_calls_with_the_renderer():
    e = token_env(ToolBudget(max_turns=3))
    first, _ = run(e.initial_observation())
    assert '"name": "lookup"' in TOKENIZER.decode(first.to_ints())
    step = run(e.step(reply(CALL)))
    assert not step.episode_done and "value of a" in TOKENIZER.decode(
        step.next_observation.to_ints()
    )


def test_the_sampled_token_budget_ends_and_grades_the_episode():
    e = token_env(ToolBudget(max_turns=9, max_sampled_tokens=len(reply(CALL)) + 1))
    run(e.initial_observation())
    assert not run(e.step(reply(CALL))).episode_done
    result = run(e.step(reply(CALL)))
    assert result.episode_done and result.metrics["stop/max_sampled_tokens"] == 1.0
    assert "graded_messages" in result.metrics


def test_the_wall_time_budget_ends_the_episode():
    e = token_env(ToolBudget(max_turns=9, max_wall_s=0.01))
    run(e.initial_observation())
    import time

    time.sleep(0.02)
    result = run(e.step(reply(CALL)))
    assert result.episode_done and result.metrics["stop/rollout_timeout"] == 1.0


@pytest.mark.parametrize(("lifetime", "distinct"), [("episode", 3), ("group", 1), ("run", 1)])
def test_tool_lifetimes_share_state_as_named_and_cleanup_closes_what_the_group_made(
    lifetime, distinct
):
    made: list[Lookup] = []

    def make():
        made.append(Lookup())
        return [made[-1].lookup]

    provider = ToolProvider(make, lifetime)  # type: ignore[arg-type]

    def make_env(tools):
        return AgentToolMessageEnv(tools, PROMPT, says_ok)

    groups = [AgentToolGroupBuilder(make_env, provider, 3) for _ in range(2)]
    envs = [run(g.make_envs()) for g in groups]
    owners = {id(e.tools_by_name["lookup"].owner) for e in envs[0]}  # type: ignore[attr-defined]
    assert len(owners) == distinct
    run(groups[0].cleanup())
    assert len(made) == {"episode": 6, "group": 2, "run": 1}[lifetime]
    closed_first = [m.closed for m in made[: {"episode": 3, "group": 1, "run": 1}[lifetime]]]
    assert all(closed_first) == (lifetime != "run")
