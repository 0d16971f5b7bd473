"""Code generation as a multi-turn tool env, as tinker-cookbook 0.6.1's code_rl (DeepCoder).

The model sees a problem (LiveCodeBench's prompt) and a `check_solution` tool. Each turn it may
call the tool with code: the code runs against the task's tests in the sandbox and the verdict
comes back as a tool message (the next observation). The episode ends when a turn makes no tool
call, or after `max_turns` turns. Then the last assistant message is graded (DeepcoderReward):

    reward = format_coef * (has_code_block - 1) + passed_all_tests

so a correct fenced answer earns 1, a wrong one 0, no code block -format_coef. Tool turns earn 0.
A turn whose tool calls all fail to parse ends the episode with `failed_parse_reward`.
The env is train_core.tool_use's agent tool env with one @tool (check_solution; its schema is
written out, as the prompt has always shown it) and DeepcoderReward as the episode's grade.

Problems come from `agentica-org/DeepCoder-Preview-Dataset` (train: primeintellect, taco,
lcbv5; test: codeforces, lcbv5), from the bundled `bundled:code`, or from local files in either
shape, converted by cookbook.datasets.code.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import numpy as np

from cookbook.envs.code_grading import CodeGrader, CodeTask, code_task, extract_code, tool_feedback
from cookbook.envs.problem_rows import ItemBatches
from kitchen.engine.errors import ConfigError, DataError
from train_core.completers import RendererLike
from train_core.renderers.content import get_text_content
from train_core.renderers.types import Message, ToolSpec
from train_core.rl.types import Env, EnvGroupBuilder, RLEnvContext
from train_core.tool_use import (
    AgentToolEnv,
    CallError,
    ToolBudget,
    agent_tool_env,
    tool,
    tool_conversation,
)
from train_core.tool_use import renderer_has_tools as has_tool_format

log = logging.getLogger("kitchen")

CodeEnvName = Literal["deepcoder", "bundled"]
DEEPCODER = "agentica-org/DeepCoder-Preview-Dataset"
DEEPCODER_TRAIN = tuple(f"{DEEPCODER}:{c}" for c in ("primeintellect", "taco", "lcbv5"))
DEEPCODER_TEST = tuple(f"{DEEPCODER}:{c}" for c in ("codeforces", "lcbv5"))

CHECK_SOLUTION: ToolSpec = {
    "name": "check_solution",
    "description": "Execute the proposed solution against the task's test cases. "
    "Use this to test your code before providing your final answer.",
    "parameters": {
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "Python code implementing the solution."}
        },
        "required": ["code"],
    },
}


@dataclass(frozen=True)
class CodeEnvSettings:
    """Per-episode knobs (tinker-cookbook's DeepcoderEnvGroupBuilder defaults)."""

    max_turns: int = 2
    format_coef: float = 0.1
    failed_parse_reward: float = -0.1
    check_tests: int | None = None
    """Tests check_solution runs (the first N); None: all of them, as tinker-cookbook."""
    max_trajectory_tokens: int = 32 * 1024
    max_generation_tokens: int | None = None
    context_overflow_reward: float = -0.1


async def deepcoder_reward(
    text: str, task: CodeTask, grader: CodeGrader, format_coef: float
) -> tuple[float, dict[str, float]]:
    """format_coef * (has_code_block - 1) + passed_all_tests, and the metrics format, correct."""
    code = extract_code(text)
    correct = 0.0
    if code is not None:
        correct = float((await grader.grade(code, task)).passed_all)
    has_code = float(code is not None)
    return format_coef * (has_code - 1.0) + correct, {"format": has_code, "correct": correct}


USAGE = json.dumps({"error": 'check_solution needs {"code": "<python program>"}', "passed": False})


def check_solution_error(error: CallError) -> str:
    """A call check_solution could not run, said as its verdicts are (with `passed`)."""
    if error.kind == "arguments":
        return USAGE
    return json.dumps({"error": error.detail, "passed": False})


class CheckSolution:
    """The check_solution tool of one episode: the task's first `check_tests` tests."""

    def __init__(self, task: CodeTask, grader: CodeGrader, check_tests: int | None) -> None:
        self.task, self.grader, self.check_tests = task, grader, check_tests

    @tool(
        name=CHECK_SOLUTION["name"],
        description=CHECK_SOLUTION["description"],
        schema=CHECK_SOLUTION["parameters"],
        errors=check_solution_error,
    )
    async def check_solution(
        self, code: Annotated[str, "Python code implementing the solution."]
    ) -> str:
        if not code.strip():
            return USAGE
        return tool_feedback(await self.grader.grade(code, self.task.first_tests(self.check_tests)))


def last_assistant_text(messages: Sequence[Message]) -> str:
    return next((get_text_content(m) for m in reversed(messages) if m["role"] == "assistant"), "")


def code_env(
    task: CodeTask,
    grader: CodeGrader,
    renderer: RendererLike,
    settings: CodeEnvSettings = CodeEnvSettings(),
    tools: bool = True,
) -> AgentToolEnv:
    """One episode on one task; see the module doc. `tools=False` (a renderer with no tool
    format): a single turn, graded. Tool calls run in order (they share the sandbox)."""
    checker = CheckSolution(task, grader, settings.check_tests)
    tool_set = [checker.check_solution] if tools else []
    prompt: list[Message] = [{"role": "user", "content": task.prompt()}]

    async def reward(messages: list[Message]) -> tuple[float, dict[str, float]]:
        return await deepcoder_reward(
            last_assistant_text(messages), task, grader, settings.format_coef
        )

    return agent_tool_env(
        renderer,
        tool_set,
        tool_conversation(renderer, tool_set, prompt) if tools else prompt,
        reward,
        budget=ToolBudget(max_turns=settings.max_turns if tools else 1),
        execution="sequential",
        failed_parse_reward=settings.failed_parse_reward,
        terminate_on_parse_error=True,
        max_trajectory_tokens=settings.max_trajectory_tokens,
        max_generation_tokens=settings.max_generation_tokens,
        context_overflow_reward=settings.context_overflow_reward,
        example_id=task.id,
    )


def renderer_has_tools(renderer: RendererLike) -> bool:
    return has_tool_format(renderer, [CHECK_SOLUTION])


@dataclass(frozen=True)
class CodeGroupBuilder(EnvGroupBuilder):
    """`group_size` episodes on one task, sharing the renderer and the grader's sandbox."""

    task: CodeTask
    renderer: RendererLike
    grader: CodeGrader
    group_size: int
    settings: CodeEnvSettings = field(default_factory=CodeEnvSettings)
    tag: str = "code"

    async def make_envs(self) -> Sequence[Env]:
        tools = renderer_has_tools(self.renderer)
        return [
            code_env(self.task, self.grader, self.renderer, self.settings, tools)
            for _ in range(self.group_size)
        ]

    def logging_tags(self) -> list[str]:
        return [self.tag]


class CodeDataset(ItemBatches[CodeTask]):
    """Consecutive slices of `tasks`, one group per task."""

    def __init__(
        self,
        tasks: Sequence[CodeTask],
        renderer: RendererLike,
        grader: CodeGrader,
        batch_size: int,
        group_size: int,
        settings: CodeEnvSettings,
        tag: str,
    ) -> None:
        def group(task: CodeTask) -> CodeGroupBuilder:
            return CodeGroupBuilder(task, renderer, grader, group_size, settings, tag)

        super().__init__(tasks, batch_size, group)


def load_code_tasks(store: Any, sources: Sequence[str], split: str) -> list[CodeTask]:
    """Tasks from every source in turn (converted by cookbook.datasets.code); rows whose tests
    cannot be graded are dropped with a warning, as tinker-cookbook drops them."""
    from cookbook.datasets.catalog import load_code

    tasks, dropped = [], 0
    for source in sources:
        for i, row in enumerate(load_code(store, source, split)):
            try:
                tasks.append(code_task(row, f"{source} ({split}) row {i}"))
            except DataError as e:
                dropped += 1
                log.debug("dropping a code task: %s", e)
    if dropped:
        log.warning("dropped %d code tasks whose tests cannot be graded", dropped)
    if not tasks:
        raise DataError(f"no usable code tasks in {', '.join(sources)} ({split})")
    return tasks


def _sources(value: str | None, default: Sequence[str]) -> list[str]:
    return [s.strip() for s in value.split(",") if s.strip()] if value else list(default)


@dataclass(frozen=True)
class CodeEnvs:
    """The code env datasets: train tasks shuffled by `seed`; the first `test_problems` test
    tasks (one sample each) when the env has a test split. `dataset` / `test_dataset` (comma-
    separated sources) replace the env's defaults: deepcoder reads DeepCoder's hub configs,
    bundled reads `bundled:code` (no test split)."""

    env: CodeEnvName
    groups_per_batch: int
    group_size: int
    settings: CodeEnvSettings = field(default_factory=CodeEnvSettings)
    dataset: str | None = None
    test_dataset: str | None = None
    test_problems: int | None = 0
    timeout_s: float = 6.0
    memory_mb: int = 512
    seed: int = 0

    def __call__(self, ctx: RLEnvContext, sandbox: Any) -> tuple[CodeDataset, CodeDataset | None]:
        if ctx.datasets is None:
            raise ConfigError("the code env needs a dataset store; none is configured")
        grader = CodeGrader(sandbox, self.timeout_s, self.memory_mb)
        default_train = DEEPCODER_TRAIN if self.env == "deepcoder" else ("bundled:code",)
        tasks = load_code_tasks(ctx.datasets, _sources(self.dataset, default_train), "train")
        order = np.random.default_rng(self.seed).permutation(len(tasks))
        s = self.settings
        train = CodeDataset(
            [tasks[i] for i in order],
            ctx.renderer,
            grader,
            self.groups_per_batch,
            self.group_size,
            s,
            self.env,
        )
        default_test = DEEPCODER_TEST if self.env == "deepcoder" else ()
        test_sources = _sources(self.test_dataset, default_test)
        if self.test_problems == 0 or not test_sources:
            return train, None
        test_tasks = load_code_tasks(ctx.datasets, test_sources, "test")[: self.test_problems]
        return train, CodeDataset(test_tasks, ctx.renderer, grader, len(test_tasks), 1, s, self.env)
