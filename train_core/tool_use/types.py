"""What a tool is and what calling one returns, in tinker-cookbook 0.6.1's shapes (`Tool`,
`ToolInput`, `ToolResult`), so a cookbook tool object runs here unchanged."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from train_core.renderers.types import Message, ToolSpec


@dataclass
class ToolInput:
    """The arguments of one call, already decoded from JSON, and the call's id."""

    arguments: dict[str, Any]
    call_id: str | None = None


@dataclass
class ToolResult:
    """The messages a call appends to the conversation (usually one `tool` message), and
    whether the episode should end after it."""

    messages: list[Message]
    should_stop: bool = False
    metrics: dict[str, float] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Tool(Protocol):
    """Anything with a name, a description, a JSON schema and an async `run`."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters_schema(self) -> dict[str, Any]: ...

    async def run(self, input: ToolInput) -> ToolResult: ...


def tool_spec(tool: Tool) -> ToolSpec:
    """The OpenAI function layout a renderer shows the model."""
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters_schema,
    }


def tool_message(content: str, call_id: str, name: str) -> Message:
    """A `tool` message answering the call `call_id` of the tool `name`."""
    return {"role": "tool", "content": content, "tool_call_id": call_id, "name": name}


def text_result(content: str, *, call_id: str = "", name: str = "", should_stop: bool = False,
                metrics: dict[str, float] | None = None) -> ToolResult:  # fmt: skip
    """A ToolResult of one text message (tinker-cookbook's `simple_tool_result`)."""
    return ToolResult([tool_message(content, call_id, name)], should_stop, dict(metrics or {}))
