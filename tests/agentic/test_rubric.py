"""rubric: the prompted grader's prompt and score parsing, per-item concurrency, and failures
(raising, timing out, unreadable) counted and bounded; the recipe's runs."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from cookbook.envs.rubric import (
    GraderBroken,
    RubricEnv,
    RubricEnvs,
    RubricGrader,
    RubricItem,
    RubricTask,
    addition_tasks,
)
from kitchen.adapters.fake.tokenizer import FakeTokenizer
from tests.agentic.helpers import two_steps
from train_core.renderers import get_renderer
from train_core.renderers.types import Message
from train_core.rl.types import RLEnvContext

TOKENIZER = FakeTokenizer()
RENDERER = get_renderer("chatml", TOKENIZER)
TASK = RubricTask(
    ({"role": "user", "content": "What is 2 + 3?"},),
    (RubricItem("Does the chatbot answer 5?"), RubricItem("Is the answer one number?")),
)


class ScriptedGrader:
    """Scores 1 when the graded completion contains '5', else 0.25; `mode` makes it fail."""

    def __init__(self, mode: str = "ok", delay: float = 0.0) -> None:
        self.mode, self.delay, self.calls, self.active, self.peak = mode, delay, 0, 0, 0

    async def __call__(self, messages: list[Message]) -> Message:
        self.calls += 1
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            await asyncio.sleep(self.delay)
            if self.mode == "raise":
                raise ConnectionError("grader endpoint down")
            if self.mode == "hang":
                await asyncio.sleep(10)
            if self.mode == "mumble":
                return {"role": "assistant", "content": "It looks fine to me."}
            completion = (
                str(messages[0]["content"]).split("<completion_to_grade>")[1].split("</")[0]
            )
            return {"role": "assistant", "content": f"<score>{1.0 if '5' in completion else 0.25}</score>"}  # fmt: skip
        finally:
            self.active -= 1


def answer(env: RubricEnv, text: str, stop: bool = True):
    tokens = TOKENIZER.encode(text + ("<|im_end|>" if stop else ""))
    asyncio.run(env.initial_observation())
    return asyncio.run(env.step(tokens))


def test_the_grader_prompt_holds_context_completion_rubric_and_format():
    prompt = TASK.items[0].grader_prompt([*TASK.convo, {"role": "assistant", "content": "5"}])
    text = prompt[0]["content"]
    assert [m["role"] for m in prompt] == ["user"]
    assert "<context>\nHuman: What is 2 + 3?\n</context>" in text
    assert "<completion_to_grade>\nChatbot: 5\n</completion_to_grade>" in text
    assert "<rubric>\nDoes the chatbot answer 5?\n</rubric>" in text and "<score>" in text
    assert TASK.items[0].extract_score("so <score> 0.5 </score>") == 0.5
    assert TASK.items[0].extract_score("<score>high</score>") is None


def test_reward_is_the_mean_item_score_minus_the_format_penalty():
    grader = RubricGrader(ScriptedGrader())
    right = answer(RubricEnv(TASK, RENDERER, grader), "5")
    assert right.reward == 1.0 and right.metrics["rubric_score"] == 1.0
    unstopped = answer(RubricEnv(TASK, RENDERER, grader), "7", stop=False)
    assert unstopped.reward == pytest.approx(0.25 - 0.1) and unstopped.metrics["format"] == 0.0


def test_items_are_graded_concurrently_up_to_the_limit():
    task = RubricTask(TASK.convo, tuple(RubricItem(f"criterion {i}") for i in range(6)))
    scripted = ScriptedGrader(delay=0.02)
    answer(RubricEnv(task, RENDERER, RubricGrader(scripted, max_concurrency=3)), "5")
    assert scripted.calls == 6 and scripted.peak == 3


@pytest.mark.parametrize("mode", ["raise", "hang"])
def test_a_grader_that_fails_or_times_out_is_counted_and_scores_the_failure_score(mode):
    scripted = ScriptedGrader(mode)
    grader = RubricGrader(scripted, timeout_s=0.05, retries=1, failure_score=0.0)
    result = answer(RubricEnv(TASK, RENDERER, grader), "5")
    assert result.reward == 0.0 and result.metrics["grader/failed"] == 2.0
    assert scripted.calls == 4 and grader.failures == 2  # each item: one try, one retry


def test_an_unreadable_grade_scores_zero_and_is_counted_apart_from_failures():
    grader = RubricGrader(ScriptedGrader("mumble"))
    result = answer(RubricEnv(TASK, RENDERER, grader), "5")
    assert result.reward == 0.0 and result.metrics["grader/unreadable"] == 2.0
    assert result.metrics["grader/failed"] == 0.0 and grader.failures == 0


def test_past_max_failures_the_run_stops_with_a_clear_error():
    grader = RubricGrader(ScriptedGrader("raise"), retries=0, max_failures=3)
    answer(RubricEnv(TASK, RENDERER, grader), "5")  # 2 failures: within the bound
    with pytest.raises(GraderBroken, match="failed 4 times in this run"):
        answer(RubricEnv(TASK, RENDERER, grader), "5")


def test_the_synthetic_additions_are_the_cookbooks_and_split_by_count():
    tasks = addition_tasks(3, random.Random(42))
    assert [m["content"] for m in tasks[0].convo[:2]] == ["What is 4 + 5?", "9"]
    x, y = map(
        int, str(tasks[0].convo[2]["content"]).removeprefix("What is ").rstrip("?").split(" + ")
    )
    assert tasks[0].items[0].rubric_str == f"Does the chatbot correctly get the answer {x + y}?"
    envs = RubricEnvs(2, 2, lambda b, r: RubricGrader(ScriptedGrader()), num_train=6, num_test=4,
                      test_problems=3)  # fmt: skip
    train, test = envs(RLEnvContext(RENDERER, TOKENIZER))
    assert len(train) == 3 and test is not None and len(test.get_batch(0)) == 3


def test_datapoints_load_from_jsonl_in_the_cookbooks_shape(tmp_path):
    from kitchen.adapters.datasets import HFDatasetStore

    row = {"convo": [{"role": "user", "content": "Say hi."}],
           "rubric_items": [{"rubric_str": "Is it a greeting?", "extraction_regex": "<s>(.*)</s>",
                             "grader_output_format_instruction": "Score in <s></s>"}]}  # fmt: skip
    (tmp_path / "r.jsonl").write_text(json.dumps(row) + "\n")
    envs = RubricEnvs(1, 1, lambda b, r: RubricGrader(ScriptedGrader()), dataset=str(tmp_path / "r.jsonl"))  # fmt: skip
    train, _ = envs(RLEnvContext(RENDERER, TOKENIZER, HFDatasetStore()))
    assert train.items[0].items[0].extraction_regex == "<s>(.*)</s>"


@pytest.mark.slow
def test_two_steps_on_the_tiny_model(tmp_path):
    train = two_steps("rubric", tmp_path, max_tokens=6, grader_max_tokens=6, num_train=8)
    # the tiny random grader writes no <score>: every grade is counted unreadable, none failed
    assert all(
        r["env/all/grader/unreadable"] == 1.0 and r["env/all/grader/failed"] == 0.0 for r in train
    )
