"""Tools for agent envs: `@tool` (a schema from a signature, validated arguments), the generic
tool env with its budgets and policies, and tool lifetimes. Shapes follow tinker-cookbook
0.6.1's tool_use library so its tools run here."""

from train_core.tool_use.agent_env import (
    AgentToolEnv,
    AgentToolMessageEnv,
    RewardFn,
    RewardResult,
    agent_tool_env,
    renderer_has_tools,
    tool_conversation,
)
from train_core.tool_use.dispatch import ToolExecution, call_tool, call_tools
from train_core.tool_use.function_tool import CallError, FunctionTool, json_error, tool
from train_core.tool_use.group import AgentToolGroupBuilder
from train_core.tool_use.lifetimes import Lifetime, ToolProvider, close_tools
from train_core.tool_use.policies import (
    LIMIT_STOPS,
    ParseErrorPolicy,
    TerminationPolicy,
    ToolBudget,
)
from train_core.tool_use.types import (
    Tool,
    ToolInput,
    ToolResult,
    text_result,
    tool_message,
    tool_spec,
)

__all__ = [
    "LIMIT_STOPS",
    "AgentToolEnv",
    "AgentToolGroupBuilder",
    "AgentToolMessageEnv",
    "CallError",
    "FunctionTool",
    "Lifetime",
    "ParseErrorPolicy",
    "RewardFn",
    "RewardResult",
    "TerminationPolicy",
    "Tool",
    "ToolBudget",
    "ToolExecution",
    "ToolInput",
    "ToolProvider",
    "ToolResult",
    "agent_tool_env",
    "call_tool",
    "call_tools",
    "close_tools",
    "json_error",
    "renderer_has_tools",
    "text_result",
    "tool",
    "tool_conversation",
    "tool_message",
    "tool_spec",
]
