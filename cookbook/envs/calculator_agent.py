"""An agent with one tool: asked "What is 23 * 4 + 7?", it calls a calculator, then answers.

The agent is a plain async function on an `openai.AsyncOpenAI` client, as a user would write it:
two chat calls with the same `tools`, the tool's result between them. A model that does not call
the tool (a small untrained one rarely does) has its reply sent to the calculator as the
expression, so every episode is two turns; the reward is 1 when the final answer's last integer
is the result. Tasks are generated from the run's seed.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from cookbook.envs.arithmetic import extract_final_int
from train_core.agents.dataset import AgentTasks
from train_core.rl.types import RLEnvContext

CALCULATOR_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression of integers with + - * and parentheses",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. 23 * 4 + 7"}},
            "required": ["expression"],
        },
    },
}

SYSTEM = "Use the calculator tool to compute the expression, then answer with the number only."

_OPERATORS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
}


def calculate(expression: str) -> str:
    """The calculator tool: the value of an integer + - * expression, or "error: ..." (never
    raises: a model's malformed expression is an answer the agent reads, not a failure)."""
    try:
        return str(_value(ast.parse(expression.strip(), mode="eval").body))
    except (SyntaxError, ValueError, RecursionError) as e:
        return f"error: {e}"


def _value(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _value(node.left), _value(node.right)
        if max(abs(left), abs(right)) > 10**12:
            raise ValueError("operands too large")
        return _OPERATORS[type(node.op)](left, right)
    raise ValueError(f"not an integer + - * expression: {ast.dump(node)[:40]}")


async def calculator_agent(
    client: Any, task: dict[str, Any], *, max_tokens: int = 32, temperature: float = 1.0
) -> float:
    """Ask, run the calculator on the tool call (or the reply), answer; 1.0 if right."""
    sampling = {"model": "policy", "max_tokens": max_tokens, "temperature": temperature}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": task["question"]},
    ]
    first = await client.chat.completions.create(
        messages=messages, tools=[CALCULATOR_TOOL], **sampling
    )
    reply = first.choices[0].message
    call = reply.tool_calls[0] if reply.tool_calls else None
    assistant: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if call is not None:
        assistant["tool_calls"] = [c.model_dump() for c in reply.tool_calls]
        result = calculate(_expression(call.function.arguments))
        messages += [assistant, {"role": "tool", "tool_call_id": call.id, "content": result}]
    else:
        result = calculate(reply.content or "")
        messages += [assistant, {"role": "user", "content": f"calculator: {result}"}]
    final = await client.chat.completions.create(
        messages=messages, tools=[CALCULATOR_TOOL], **sampling
    )
    answer = extract_final_int(final.choices[0].message.content or "")
    return 1.0 if answer == task["answer"] else 0.0


def _expression(arguments: str) -> str:
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        return arguments
    return str(parsed.get("expression", "")) if isinstance(parsed, dict) else str(parsed)


def calculator_tasks(n: int, max_operand: int, seed: int) -> list[dict[str, Any]]:
    """`n` tasks "What is a * b + c?" with operands in 0..max_operand, from `seed`."""
    rng = np.random.default_rng([seed, 46])
    tasks = []
    for a, b, c in rng.integers(0, max_operand + 1, size=(n, 3)).tolist():
        tasks.append({"question": f"What is {a} * {b} + {c}?", "answer": a * b + c})
    return tasks


@dataclass(frozen=True)
class CalculatorAgentTasks:
    """The env dataset factory: `n_batches` batches of `groups_per_batch` tasks, each a group of
    `group_size` rollouts of calculator_agent; no test set."""

    groups_per_batch: int
    group_size: int
    n_batches: int
    max_operand: int = 12
    seed: int = 0
    max_tokens: int = 32
    temperature: float = 1.0

    def __call__(self, ctx: RLEnvContext) -> tuple[AgentTasks, None]:
        agent = partial(calculator_agent, max_tokens=self.max_tokens, temperature=self.temperature)
        tasks = calculator_tasks(
            self.groups_per_batch * self.n_batches, self.max_operand, self.seed
        )
        train = AgentTasks(agent, tasks, self.groups_per_batch, self.group_size, ("calculator",))
        return train, None
