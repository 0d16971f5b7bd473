"""Running a turn's tool calls: look each up by name, decode its JSON arguments, run it, and
turn every failure into an error message for the model. `parallel` runs a turn's calls at
once (independent tools); `sequential` runs them in the order asked (tools sharing state).
Results come back in the order asked either way."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from train_core.renderers.types import ToolCall
from train_core.tool_use.function_tool import CallError, json_error
from train_core.tool_use.types import Tool, ToolInput, ToolResult, text_result

ToolExecution = Literal["parallel", "sequential"]


def unknown_tool(name: str, known: Sequence[str]) -> CallError:
    return CallError("unknown_tool", f"unknown tool {name!r}; use {', '.join(known)}")


async def call_tool(
    tools: Mapping[str, Tool], call: ToolCall, errors: Callable[[CallError], str] = json_error
) -> ToolResult:
    """One call's result. An unknown tool's error is rendered by `errors`; a known tool's
    errors by the tool's own `errors` when it has one (FunctionTool), else by `errors`."""
    name, call_id = call.function.name, call.id or ""
    if name not in tools:
        result = text_result(errors(unknown_tool(name, list(tools))), call_id=call_id, name=name)
        result.metadata["error"] = "unknown_tool"
        return result
    target = tools[name]
    render = getattr(target, "errors", errors)
    try:
        arguments = json.loads(call.function.arguments)
        if not isinstance(arguments, dict):
            raise TypeError(f"got a JSON {type(arguments).__name__}")
    except (json.JSONDecodeError, TypeError) as e:
        error = CallError("json", f"arguments are not a JSON object: {e}")
        result = text_result(render(error), call_id=call_id, name=name)
        result.metadata["error"] = "json"
        return result
    return await target.run(ToolInput(arguments, call_id))


async def call_tools(
    tools: Mapping[str, Tool],
    calls: Sequence[ToolCall],
    execution: ToolExecution = "parallel",
    errors: Callable[[CallError], str] = json_error,
) -> list[ToolResult]:
    if execution == "sequential":
        return [await call_tool(tools, c, errors) for c in calls]
    return list(await asyncio.gather(*(call_tool(tools, c, errors) for c in calls)))
