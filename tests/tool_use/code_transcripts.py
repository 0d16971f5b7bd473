"""Scripted check_solution episodes, recorded turn by turn (reward, done, the next prompt as
text, metrics in order, logs): test_code_env_rebuild compares them with what the hand-rolled
env of commit 07f6a55 recorded (code_transcripts.json, written by running this module there)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from cookbook.envs.code import CodeEnvSettings, CodeGroupBuilder
from cookbook.envs.code_grading import code_task
from cookbook.envs.sandbox_grading import CaseResult, GradeReport
from kitchen.adapters.fake.tokenizer import FakeTokenizer
from train_core.renderers import get_renderer

TOKENIZER = FakeTokenizer()
RENDERER = get_renderer("chatml", TOKENIZER)
GOLDEN = Path(__file__).with_name("code_transcripts.json")
TASK = code_task(
    {
        "problem": "Print the sum of two integers read from one line.",
        "tests": [
            {"input": "1 2\n", "output": "3\n", "testtype": "stdin_stdout", "metadata": {}},
            {"input": "5 5\n", "output": "10\n", "testtype": "stdin_stdout", "metadata": {}},
        ],
    }
)


class ScriptedGrader:
    """Passes a program that contains "a + b"; `first` test only when it contains "print(3)"."""

    async def grade(self, code: str, task: Any) -> GradeReport:
        cases = []
        for i in range(task.num_tests):
            ok = "a + b" in code or ("print(3)" in code and i == 0)
            cases.append(CaseResult(index=i, passed=ok, reason="passed" if ok else "wrong answer"))
        return GradeReport(cases=cases)


def call(name: str, arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def fenced(code: str) -> str:
    return f"Answer:\n```python\n{code}\n```"


OK, WRONG, FIRST = "print(a + b)", "print(a * b)", "print(3)"
EPISODES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "check_then_answer": ({"max_turns": 3}, [call("check_solution", {"code": WRONG}), fenced(OK)]),
    "bad_arguments": (
        {"max_turns": 5},
        [
            call("check_solution", {"code": 5}),
            call("check_solution", {"code": "  "}),
            call("check_solution", {}),
            call("run_python", {"code": OK}),
            '<tool_call>\n{"name": "check_solution", "arguments": [1]}\n</tool_call>',
        ],
    ),
    "two_calls_one_turn": (
        {"max_turns": 2},
        [call("check_solution", {"code": WRONG}) + call("check_solution", {"code": OK}), "no code"],
    ),
    "unparsable": ({}, ["<tool_call>\n{not json\n</tool_call>"]),
    "call_on_last_turn": (
        {"max_turns": 1},
        [fenced(OK) + "\n" + call("check_solution", {"code": OK})],
    ),
    "first_tests_only": (
        {"max_turns": 2, "check_tests": 1},
        [call("check_solution", {"code": FIRST}), fenced(FIRST)],
    ),
    "turns_run_out": (
        {"max_turns": 2},
        [call("check_solution", {"code": WRONG}), call("check_solution", {"code": OK})],
    ),
}


async def record(settings: dict[str, Any], replies: list[str]) -> list[dict[str, Any]]:
    builder = CodeGroupBuilder(TASK, RENDERER, ScriptedGrader(), 1, CodeEnvSettings(**settings))  # type: ignore[arg-type]
    env = (await builder.make_envs())[0]
    first, _ = await env.initial_observation()  # type: ignore[misc]
    turns: list[dict[str, Any]] = [{"prompt": TOKENIZER.decode(first.to_ints())}]
    for text in replies:
        step = await env.step(TOKENIZER.encode(text + "<|im_end|>"))
        turns.append(
            {
                "reward": step.reward,
                "done": step.episode_done,
                "next": TOKENIZER.decode(step.next_observation.to_ints()),
                "metrics": list(step.metrics.items()),
                "logs": dict(step.logs),
            }
        )
        if step.episode_done:
            break
    return turns


def transcripts() -> dict[str, list[dict[str, Any]]]:
    return {name: asyncio.run(record(*episode)) for name, episode in EPISODES.items()}


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps(transcripts(), indent=1, sort_keys=True) + "\n")
