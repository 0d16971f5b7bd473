"""@tool: the schema a model sees is tinker-cookbook's for the same function, arguments are
validated before the function runs, and every failure becomes a message, never an exception."""

from __future__ import annotations

import asyncio
import json
from enum import StrEnum
from typing import Annotated, Literal

import pydantic
import pytest
from tinker_cookbook.tool_use import simple_tool_result
from tinker_cookbook.tool_use import tool as cookbook_tool

from train_core.renderers.types import ToolCall
from train_core.tool_use import ToolInput, call_tool, call_tools, tool, tool_spec


class Colour(StrEnum):
    RED = "red"
    BLUE = "blue"


async def search(query: Annotated[str, "The search query"], k: int = 3) -> str:
    """Search the corpus."""
    return query


async def plot(
    xs: Annotated[list[float], pydantic.Field(description="x values", min_length=1)],
    style: Literal["line", "bar"] = "line",
    colour: Colour = Colour.RED,
    title: Annotated[str | None, "Chart title"] = None,
    width: Annotated[int, pydantic.Field(ge=1, le=100)] = 10,
) -> str:
    """Plot points.

    A longer description over lines."""
    return "ok"


def untyped(a, b=2):  # type: ignore[no-untyped-def]
    """No hints at all."""
    return "ok"


@pytest.mark.parametrize("fn", [search, plot, untyped], ids=lambda f: f.__name__)
def test_the_schema_is_the_cookbooks_for_the_same_function(fn):
    ours, theirs = tool(fn), cookbook_tool(fn)
    assert ours.parameters_schema == theirs.parameters_schema
    assert tool_spec(ours) == theirs.to_spec()


def test_annotated_descriptions_and_defaults_reach_the_schema():
    schema = tool(search).parameters_schema
    assert schema["properties"]["query"]["description"] == "The search query"
    assert schema["required"] == ["query"] and schema["properties"]["k"]["default"] == 3


def run(coro):
    return asyncio.run(coro)


def test_arguments_are_validated_before_the_function_runs():
    ran: list[object] = []

    @tool
    def double(n: Annotated[int, pydantic.Field(ge=0)]) -> str:
        """Double n."""
        ran.append(n)
        return str(2 * n)

    good = run(double.run(ToolInput({"n": 4}, "c1")))
    bad = run(double.run(ToolInput({"n": -1}, "c2")))
    missing = run(double.run(ToolInput({}, "c3")))
    assert good.messages == [
        {"role": "tool", "content": "8", "tool_call_id": "c1", "name": "double"}
    ]
    assert ran == [4]
    for result in (bad, missing):
        assert result.metadata["error"] == "arguments"
        assert "invalid arguments" in json.loads(result.messages[0]["content"])["error"]


def test_a_raising_tool_is_an_error_message_and_a_method_tool_sees_its_instance():
    class Counter:
        def __init__(self) -> None:
            self.n = 0

        @tool
        async def bump(self, by: int = 1) -> str:
            """Add to the counter."""
            if by > 5:
                raise RuntimeError("too much")
            self.n += by
            return str(self.n)

    a, b = Counter(), Counter()
    assert run(a.bump.run(ToolInput({"by": 2}))).messages[0]["content"] == "2"
    assert run(b.bump.run(ToolInput({}))).messages[0]["content"] == "1"
    boom = run(a.bump.run(ToolInput({"by": 9})))
    assert boom.metadata["error"] == "execution" and "too much" in boom.messages[0]["content"]
    assert (a.n, b.n) == (2, 1)


def test_a_cookbook_tool_object_runs_through_kitchens_dispatch():
    @cookbook_tool
    async def echo(text: Annotated[str, "Text"]):  # type: ignore[no-untyped-def]
        """Echo."""
        return simple_tool_result(text)

    call = ToolCall(id="x", function=ToolCall.FunctionBody(name="echo", arguments='{"text": "hi"}'))
    result = run(call_tool({"echo": echo}, call))  # type: ignore[dict-item]
    assert result.messages[0]["content"] == "hi" and result.messages[0]["tool_call_id"] == "x"


def calls(*pairs: tuple[str, str]) -> list[ToolCall]:
    return [ToolCall(id=f"c{i}", function=ToolCall.FunctionBody(name=n, arguments=a))
            for i, (n, a) in enumerate(pairs)]  # fmt: skip


def test_unknown_tools_and_non_object_arguments_are_errors_naming_the_tools():
    tools = {"search": tool(search)}
    unknown, not_object = run(
        call_tools(tools, calls(("fetch", "{}"), ("search", "[1, 2]")), "sequential")
    )
    assert json.loads(unknown.messages[0]["content"]) == {
        "error": "unknown tool 'fetch'; use search"
    }
    assert "not a JSON object" in not_object.messages[0]["content"]


@pytest.mark.parametrize("execution", ["parallel", "sequential"])
def test_parallel_calls_overlap_sequential_ones_do_not_and_results_keep_the_asked_order(execution):
    log: list[str] = []

    @tool
    async def slow(name: str, delay: float) -> str:
        """Sleep."""
        log.append(f"start {name}")
        await asyncio.sleep(delay)
        log.append(f"end {name}")
        return name

    batch = calls(("slow", '{"name": "a", "delay": 0.05}'), ("slow", '{"name": "b", "delay": 0.0}'))
    results = run(call_tools({"slow": slow}, batch, execution))
    assert [r.messages[0]["content"] for r in results] == ["a", "b"]
    if execution == "parallel":
        assert log == ["start a", "start b", "end b", "end a"]
    else:
        assert log == ["start a", "end a", "start b", "end b"]
