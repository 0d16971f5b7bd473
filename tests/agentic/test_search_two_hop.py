"""search_tool's two-hop task (bundled:search_two_hop, `--preset two_hop`): one search cannot
answer, two can. The real BM25 index keeps the founder's passage out of the question's results
and puts it first for the founder's name; a policy that searches twice scores 1, one that
searches once or answers blind scores 0; the demonstrations search twice and replay at reward 1."""

from __future__ import annotations

import asyncio
import json
import re
import sys

import pytest

from cookbook.envs.retrievers import BM25Retriever
from cookbook.envs.search import TWO_HOP_BUNDLED, SearchEnvs
from cookbook.envs.search_data import DATASETS, TWO_HOP, generate, write_bundled
from cookbook.envs.search_demos import FOUNDER, two_hop_demos
from cookbook.recipes.search_tool import SearchToolConfig
from kitchen.adapters.datasets import HFDatasetStore
from kitchen.adapters.fake.tokenizer import FakeTokenizer
from kitchen.app.resolve import resolve_config
from tests.agentic.helpers import dry_run, two_steps
from tests.agentic.test_search_demos import replay
from tests.agentic.test_search_tool import Blind
from train_core.completers import TokensWithLogprobs
from train_core.renderers import get_renderer
from train_core.rl import do_group_rollout
from train_core.rl.metrics import trajectory_metrics
from train_core.rl.types import RLEnvContext

TOKENIZER = FakeTokenizer()
RENDERER = get_renderer("chatml", TOKENIZER)
STORE = HFDatasetStore()
N_RESULTS = SearchEnvs(1, 1).n_results
PASSAGES = [r["text"] for r in STORE.load(TWO_HOP_BUNDLED, "passages")]
QUESTIONS = [*STORE.load(TWO_HOP_BUNDLED, "train"), *STORE.load(TWO_HOP_BUNDLED, "test")]


def reply(text: str) -> TokensWithLogprobs:
    tokens = TOKENIZER.encode(text + "<|im_end|>")
    return TokensWithLogprobs(tokens, [-0.1] * len(tokens))


def search(query: str, lead: str = "") -> TokensWithLogprobs:
    call = {"name": "search", "arguments": {"query_list": [query]}}
    return reply(f"{lead}<tool_call>\n{json.dumps(call)}\n</tool_call>")


def hops(question: str) -> tuple[str, str, str]:
    """The question's institution passage, its founder, and the founder's passage."""
    institution = question.split("founder of the ")[1].removesuffix(" born?")
    (first,) = [p for p in PASSAGES if f"The {institution} was" in p]
    founder = FOUNDER.search(first).group(1)  # type: ignore[union-attr]
    (second,) = [p for p in PASSAGES if p.startswith(f"{founder} was a ")]
    return first, founder, second


def test_the_two_hop_files_are_the_generators_output_and_keep_the_one_hop_world(tmp_path):
    from cookbook.data import DATA_DIR

    written = write_bundled(tmp_path, name=TWO_HOP)
    for path in written:
        assert path.read_bytes() == (DATA_DIR / path.name).read_bytes(), path.name
    assert {p.name for p in written} == set(DATASETS[TWO_HOP][1].values())
    # The one-hop passages come first, unchanged, so a name means the same in both tasks.
    assert PASSAGES[:200] == [p["text"] for p in generate()["passages"]]
    train = STORE.load(TWO_HOP_BUNDLED, "train")
    assert (len(PASSAGES), len(train), len(QUESTIONS)) == (320, 80, 120)


def test_one_search_of_the_question_misses_the_answer_and_a_search_for_the_founder_finds_it():
    retriever = BM25Retriever(PASSAGES)
    asked = [q["question"] for q in QUESTIONS]
    founders = [hops(q)[1] for q in asked]
    by_question = asyncio.run(retriever.retrieve(asked, N_RESULTS))
    by_founder = asyncio.run(retriever.retrieve(founders, N_RESULTS))
    for row, found, second_found in zip(QUESTIONS, by_question, by_founder, strict=True):
        first, _, second = hops(row["question"])
        assert found[0] == first and second not in found, row["question"]
        assert not any(g in " ".join(found) for g in row["golden_answers"]), row["question"]
        assert second_found[0] == second and row["golden_answers"][0] in second


class TwoHops:
    """Searches the question, then the founder the first passage names, then answers with the
    town the founder's passage names; `hops=1` answers after the first search with the founder,
    the one name its result offers."""

    def __init__(self, hops: int = 2) -> None:
        self.hops = hops

    async def __call__(self, model_input, stop, *, max_tokens=None):  # type: ignore[no-untyped-def]
        shown = TOKENIZER.decode(model_input.to_ints())
        searched = shown.count("<|im_start|>tool")
        if searched == 0:
            return search(shown.rsplit("<|im_start|>user\n", 1)[1].split("<|im_end|>")[0])
        best = shown.rsplit("Document 1:\n", 1)[1].split("\n")[0]
        founder = FOUNDER.search(best)
        if founder and searched < self.hops:
            return search(founder.group(1))
        town = re.search(r" born in (\w+)\.", best)
        return reply(f"Answer: {town.group(1) if town else founder.group(1) if founder else '?'}")


def test_policies_on_the_test_split():
    _, test = SearchEnvs(1, 1, TWO_HOP_BUNDLED, TWO_HOP_BUNDLED, 40, corpus=TWO_HOP_BUNDLED)(
        RLEnvContext(RENDERER, TOKENIZER, STORE)
    )
    assert test is not None and len(test.items) == 40

    def play(policy):  # type: ignore[no-untyped-def]
        async def all_groups():  # type: ignore[no-untyped-def]
            return await asyncio.gather(*(do_group_rollout(b, policy) for b in test.get_batch(0)))

        groups = asyncio.run(all_groups())
        rewards = [r for g in groups for r in g.get_total_rewards()]
        return rewards, trajectory_metrics(groups)["tool_calls_per_episode"]

    assert play(TwoHops()) == ([1.0] * 40, 2.0)
    assert play(TwoHops(hops=1)) == ([0.0] * 40, 1.0)
    assert play(Blind()) == ([0.0] * 40, 0.0)


DEMOS = two_hop_demos(STORE, RENDERER)


def test_the_demos_search_the_question_then_the_founder_on_train_questions_only():
    train = {r["question"] for r in STORE.load(TWO_HOP_BUNDLED, "train")}
    test = STORE.load(TWO_HOP_BUNDLED, "test")
    assert len(DEMOS) == len(train)
    shown = " ".join(m["content"] for d in DEMOS for m in d["messages"])
    assert not any(r["question"] in shown for r in test)
    # No demo reads a test question's answer: no test institution is ever searched for.
    searches = [m["content"] for d in DEMOS for m in d["messages"] if "<tool_call>" in m["content"]]
    assert not any(
        r["question"].split("founder of the ")[1][:-6] in " ".join(searches) for r in test
    )
    for d in DEMOS:
        _system, user, call_1, result_1, call_2, result_2, final = d["messages"]
        assert user["content"] in train
        first, founder, second = hops(user["content"])
        queries = []
        for call in (call_1, call_2):
            message, _ = RENDERER.parse_response(TOKENIZER.encode(call["content"] + "<|im_end|>"))
            (tool_call,) = message["tool_calls"]
            queries.append(json.loads(tool_call.function.arguments)["query_list"])
        assert queries == [[user["content"]], [founder]]
        assert first in result_1["content"] and second in result_2["content"]
        assert final["content"] == f"Answer: {second.split(' born in ')[1].split('.')[0]}"
    assert two_hop_demos(STORE, RENDERER, seed=1) != DEMOS


def test_every_demo_replayed_in_the_two_hop_env_earns_reward_1_with_two_searches():
    envs = SearchEnvs(1, 1, TWO_HOP_BUNDLED, None, corpus=TWO_HOP_BUNDLED)
    assert replay(DEMOS, envs) == ([1.0] * len(DEMOS), 2.0)


def test_the_script_writes_the_two_hop_demos(tmp_path, monkeypatch):
    from scripts.search_tool_demos import main

    out = tmp_path / "demos.jsonl"
    monkeypatch.setattr(
        sys, "argv", ["search_tool_demos.py", str(out), "--two-hop", "--limit", "3"]
    )
    main()
    assert [json.loads(line) for line in out.read_text().splitlines()] == DEMOS[:3]


def two_hop_preset() -> SearchToolConfig:
    cfg = resolve_config("search_tool", preset="two_hop").config
    assert isinstance(cfg, SearchToolConfig)
    return cfg


def test_the_two_hop_preset_dry_runs_on_the_two_hop_files():
    assert "SearchEnvs" in dry_run("search_tool", "--preset", "two_hop")
    cfg = two_hop_preset()
    assert (cfg.dataset, cfg.test_dataset, cfg.corpus) == (TWO_HOP_BUNDLED,) * 3


@pytest.mark.slow
def test_two_steps_of_the_two_hop_preset_on_the_tiny_model(tmp_path):
    cfg = two_hop_preset()
    train = two_steps("search_tool", tmp_path, max_tokens=8, dataset=cfg.dataset,
                      test_dataset=cfg.test_dataset, corpus=cfg.corpus)  # fmt: skip
    assert all(r["env/all/total_episodes"] == 4 for r in train)
    assert "founder of the" in (tmp_path / "rollouts" / "iter_000000.jsonl").read_text()
