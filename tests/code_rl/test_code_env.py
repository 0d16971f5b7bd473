"""The code env on the real local sandbox: grading, the DeepcoderReward formula, the
check_solution tool over turns, and loading DeepCoder-shaped rows from local files."""

from __future__ import annotations

import asyncio
import json

import pytest

from cookbook.envs.code import (
    CodeEnvs,
    CodeEnvSettings,
    CodeGroupBuilder,
    deepcoder_reward,
    load_code_tasks,
)
from cookbook.envs.code_grading import CodeGrader, code_task, extract_code, lcb_prompt
from kitchen.adapters.datasets.store import HFDatasetStore
from kitchen.adapters.fake.tokenizer import FakeTokenizer
from train_core.renderers import get_renderer
from train_core.rl.types import RLEnvContext

TOKENIZER = FakeTokenizer()
RENDERER = get_renderer("chatml", TOKENIZER)

SUM_TASK = code_task(
    {
        "problem": "Print the sum of two integers read from one line.",
        "tests": [
            {"input": "1 2\n", "output": "3\n", "testtype": "stdin_stdout", "metadata": {}},
            {"input": "5 5\n", "output": "10\n", "testtype": "stdin_stdout", "metadata": {}},
        ],
    }
)
SUM_OK = "a, b = map(int, input().split())\nprint(a + b)"
SUM_WRONG = "a, b = map(int, input().split())\nprint(a * b)"


def run(coro):
    return asyncio.run(coro)


def fenced(code: str) -> str:
    return f"Here it is:\n```python\n{code}\n```"


def tool_call(code: str) -> str:
    payload = {"name": "check_solution", "arguments": {"code": code}}
    return f"<tool_call>\n{json.dumps(payload)}\n</tool_call>"


def reply(text: str) -> list[int]:
    return TOKENIZER.encode(text + "<|im_end|>")


def make_env(sandbox, task=SUM_TASK, **settings):
    builder = CodeGroupBuilder(task, RENDERER, CodeGrader(sandbox), 1, CodeEnvSettings(**settings))
    return run(builder.make_envs())[0]


def test_bundled_reference_solutions_pass_and_wrong_programs_fail(sandbox):
    tasks = load_code_tasks(HFDatasetStore(), ["bundled:code"], "train")
    rows = {json.loads(line)["id"]: json.loads(line) for line in open_bundled_code()}
    stdio = [t for t in tasks if t.stdio_tests][:3]
    calls = [t for t in tasks if t.call_tests][:3]
    grader = CodeGrader(sandbox)

    async def grade_all():
        good = [grader.grade(rows[t.id]["solution"], t) for t in stdio + calls]
        bad = [grader.grade(wrong_program(t), t) for t in stdio + calls]
        return await asyncio.gather(*good), await asyncio.gather(*bad)

    good, bad = run(grade_all())
    assert all(r.passed_all for r in good), [r.summary() for r in good]
    assert not any(r.passed_all for r in bad)


def wrong_program(task):
    """Prints 0, or defines the task's function returning a value no test expects."""
    if not task.call_tests:
        return "print(0)"
    return f"def {task.call_tests[0].fn_name}(*args):\n    return '\\x00wrong'"


def open_bundled_code():
    from importlib import resources

    return (resources.files("cookbook.data") / "code.jsonl").open()


def test_deepcoder_reward_is_format_coef_times_has_code_minus_one_plus_correct(sandbox):
    grader = CodeGrader(sandbox)
    no_code = run(deepcoder_reward("I would add them.", SUM_TASK, grader, 0.1))
    wrong = run(deepcoder_reward(fenced(SUM_WRONG), SUM_TASK, grader, 0.1))
    right = run(deepcoder_reward(fenced(SUM_OK), SUM_TASK, grader, 0.1))
    assert no_code == (pytest.approx(-0.1), {"format": 0.0, "correct": 0.0})
    assert wrong == (0.0, {"format": 1.0, "correct": 0.0})
    assert right == (1.0, {"format": 1.0, "correct": 1.0})


def test_the_last_fenced_block_is_the_answer():
    assert extract_code(fenced("print(1)") + "\nor\n" + fenced("print(2)")) == "print(2)"
    assert extract_code("no code") is None


def test_check_solution_runs_the_tests_and_its_verdict_is_the_next_observation(sandbox):
    env = make_env(sandbox, max_turns=3)
    first, _ = run(env.initial_observation())
    assert "check_solution" in TOKENIZER.decode(first.to_ints())
    step1 = run(env.step(reply(tool_call(SUM_WRONG))))
    assert (step1.reward, step1.episode_done) == (0.0, False)
    shown = TOKENIZER.decode(step1.next_observation.to_ints())
    assert "<|im_start|>tool" in shown and '"passed": false' in shown
    assert "got '2', expected '3'" in shown
    step2 = run(env.step(reply(fenced(SUM_OK))))
    assert step2.episode_done and step2.reward == 1.0
    assert step2.metrics["stop/completed"] == 1.0 and step2.metrics["correct"] == 1.0


def test_a_tool_call_on_the_last_turn_ends_the_episode_and_is_graded(sandbox):
    env = make_env(sandbox, max_turns=1)
    run(env.initial_observation())
    result = run(env.step(reply(fenced(SUM_OK) + "\n" + tool_call(SUM_OK))))
    assert result.episode_done and result.reward == 1.0
    assert result.metrics["stop/max_turns"] == 1.0


def test_an_unparsable_tool_call_ends_with_the_failed_parse_reward(sandbox):
    env = make_env(sandbox)
    run(env.initial_observation())
    result = run(env.step(reply("<tool_call>\n{not json\n</tool_call>")))
    assert result.episode_done and result.reward == pytest.approx(-0.1)
    assert result.metrics["stop/parse_error"] == 1.0


def test_check_solution_can_run_only_the_first_tests(sandbox):
    env = make_env(sandbox, max_turns=2, check_tests=1)
    run(env.initial_observation())
    # Right on test 0 only: the tool, which runs test 0, says passed; the final grade does not.
    special = "a, b = map(int, input().split())\nprint(3)"
    step1 = run(env.step(reply(tool_call(special))))
    assert '"passed": true' in TOKENIZER.decode(step1.next_observation.to_ints())
    step2 = run(env.step(reply(fenced(special))))
    assert step2.reward == 0.0


def test_functional_tests_call_the_named_function(sandbox):
    task = code_task(
        {
            "problem": "Write combine(a, b).",
            "starter_code": "def combine(a, b):\n    ",
            "tests": [
                {
                    "input": "1\n2",
                    "output": "3",
                    "testtype": "functional",
                    "metadata": {"func_name": "combine"},
                },
                {
                    "input": "[1, 2]\n[3]",
                    "output": "[1, 2, 3]",
                    "testtype": "functional",
                    "metadata": {"func_name": "combine"},
                },
            ],
        }
    )
    grader = CodeGrader(sandbox)
    assert run(grader.grade("def combine(a, b):\n    return a + b", task)).passed_all
    report = run(
        grader.grade("class Solution:\n    def combine(self, a, b):\n        return a", task)
    )
    assert [c.passed for c in report.cases] == [False, False]
    assert "starter code" in lcb_prompt(task.problem, task.starter_code)


DEEPCODER_ROWS = [
    {  # lcbv5 / codeforces: tests as a JSON string, functional inputs one JSON value per line
        "problem": "Return the maximum of a list.",
        "starter_code": "class Solution:\n    def biggest(self, nums):\n        ",
        "metadata": json.dumps({"func_name": "biggest"}),
        "tests": json.dumps(
            [
                {"input": "[1, 5, 2]", "output": "5", "testtype": "functional", "metadata": {}},
                {"input": "[-3]", "output": "-3", "testtype": "functional", "metadata": {}},
            ]
        ),
    },
    {  # primeintellect: type / fn_name, expected values wrapped in a list
        "problem": "Double a number.",
        "tests": json.dumps(
            [{"type": "function_call", "fn_name": "double", "input": [4], "output": [8]}]
        ),
    },
    {  # taco: inputs / outputs
        "problem": "Echo the line you read.",
        "tests": json.dumps({"inputs": ["hi\n", "yo\n"], "outputs": ["hi\n", "yo\n"]}),
    },
    {  # unusable functional test (not JSON): dropped, as tinker-cookbook drops it
        "problem": "Broken.",
        "tests": json.dumps(
            [
                {
                    "input": "{oops",
                    "output": "1",
                    "testtype": "functional",
                    "metadata": {"func_name": "f"},
                }
            ]
        ),
    },
]
SOLUTIONS = {
    "Return the maximum of a list.": "class Solution:\n    def biggest(self, nums):\n        return max(nums)",
    "Double a number.": "def double(x):\n    return 2 * x",
    "Echo the line you read.": "print(input())",
}


def test_deepcoder_rows_from_local_files_load_grade_and_batch(sandbox, tmp_path):
    train = tmp_path / "deepcoder.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in DEEPCODER_ROWS))
    (tmp_path / "deepcoder_test.jsonl").write_text(json.dumps(DEEPCODER_ROWS[2]) + "\n")
    envs = CodeEnvs("deepcoder", groups_per_batch=2, group_size=3, dataset=str(train),
                    test_dataset=str(train), test_problems=None)  # fmt: skip
    ctx = RLEnvContext(RENDERER, TOKENIZER, HFDatasetStore())
    train_ds, test_ds = envs(ctx, sandbox)
    assert len(train_ds) == 2 and len(test_ds) == 1  # 3 usable tasks in batches of 2; 1 test
    builders = [b for i in range(len(train_ds)) for b in train_ds.get_batch(i)]
    assert sorted(b.task.problem for b in builders) == sorted(SOLUTIONS)
    assert all(len(run(b.make_envs())) == 3 for b in builders)
    grader = CodeGrader(sandbox)
    for b in builders:
        assert run(grader.grade(SOLUTIONS[b.task.problem], b.task)).passed_all, b.task.problem
        assert not run(grader.grade("print('nope')", b.task)).passed_all
