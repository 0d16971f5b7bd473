"""search_tool's warm-start demonstrations: train questions only, each replayed through the real
search env (same prompt, same tool result) earns reward 1 with one search call."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from cookbook.envs.search import SearchEnvs
from cookbook.envs.search_demos import search_demos
from kitchen.adapters.datasets import HFDatasetStore
from kitchen.adapters.fake.tokenizer import FakeTokenizer
from train_core.completers import TokensWithLogprobs
from train_core.renderers import get_renderer
from train_core.rl import do_group_rollout
from train_core.rl.metrics import trajectory_metrics
from train_core.rl.types import RLEnvContext

TOKENIZER = FakeTokenizer()
RENDERER = get_renderer("chatml", TOKENIZER)
STORE = HFDatasetStore()
DEMOS = search_demos(STORE, RENDERER)


def test_demos_cover_train_questions_only_and_are_seeded():
    train = {r["question"] for r in STORE.load("bundled:search", "train")}
    test = {r["question"] for r in STORE.load("bundled:search", "test")}
    asked = [d["messages"][1]["content"] for d in DEMOS]
    assert len(asked) > 200 and set(asked) <= train
    shown = " ".join(m["content"] for d in DEMOS for m in d["messages"])
    assert not any(q in shown for q in test)
    assert search_demos(STORE, RENDERER) == DEMOS
    assert search_demos(STORE, RENDERER, seed=1) != DEMOS


def test_each_demo_calls_search_parsably_and_its_result_holds_the_answer():
    for d in DEMOS:
        system, _user, call, result, final = d["messages"]
        tokens = TOKENIZER.encode(call["content"] + "<|im_end|>")
        message, _ = RENDERER.parse_response(tokens)
        (tool_call,) = message["tool_calls"]
        assert tool_call.function.name == "search"
        assert json.loads(tool_call.function.arguments) == {"query_list": [_user["content"]]}
        assert final["content"].removeprefix("Answer: ") in result["content"]
        assert "<tools>" in system["content"]


class Replay:
    """Plays each demo's assistant turns in order, checking the env shows the demo's prompt and
    each of its tool results so far."""

    def __init__(self, demos: list[dict[str, Any]]) -> None:
        self.by_question = {d["messages"][1]["content"]: d["messages"] for d in demos}

    async def __call__(self, model_input, stop, *, max_tokens=None):  # type: ignore[no-untyped-def]
        shown = TOKENIZER.decode(model_input.to_ints())
        question = shown.split("<|im_start|>user\n", 1)[1].split("<|im_end|>")[0]
        messages = self.by_question[question]
        assert shown.startswith(f"<|im_start|>system\n{messages[0]['content']}<|im_end|>")
        turn = shown.count("<|im_start|>tool")
        for result in messages[3 : 2 * turn + 2 : 2]:
            assert f"<|im_start|>tool\n{result['content']}<|im_end|>" in shown
        tokens = TOKENIZER.encode(messages[2 + 2 * turn]["content"] + "<|im_end|>")
        return TokensWithLogprobs(tokens, [-0.1] * len(tokens))


def replay(demos: list[dict[str, Any]], envs: SearchEnvs) -> tuple[list[float], float]:
    """Every demo replayed through `envs`' train env: the rewards and calls per episode."""
    train, _ = envs(RLEnvContext(RENDERER, TOKENIZER, STORE))
    by_question = {t.question: t for t in train.items}
    policy = Replay(demos)

    async def all_groups():  # type: ignore[no-untyped-def]
        builders = [train.builder(by_question[q]) for q in policy.by_question]
        return await asyncio.gather(*(do_group_rollout(b, policy) for b in builders))

    groups = asyncio.run(all_groups())
    rewards = [r for g in groups for r in g.get_total_rewards()]
    return rewards, trajectory_metrics(groups)["tool_calls_per_episode"]


def test_every_demo_replayed_in_the_search_env_earns_reward_1():
    assert replay(DEMOS, SearchEnvs(1, 1)) == ([1.0] * len(DEMOS), 1.0)


def test_the_script_writes_the_demos_as_jsonl(tmp_path, monkeypatch):
    from scripts.search_tool_demos import main

    out = tmp_path / "demos.jsonl"
    monkeypatch.setattr(sys, "argv", ["search_tool_demos.py", str(out), "--limit", "5"])
    main()
    assert [json.loads(line) for line in out.read_text().splitlines()] == DEMOS[:5]
