"""search_tool: on the bundled task only a policy that searches earns reward; the cookbook's
answer normalisation and exact match; the retrievers; the recipe's runs."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from cookbook.envs.retrievers import BM25Retriever, ChromaRetriever
from cookbook.envs.search import SearchEnvs, SearchTool, search_task
from cookbook.envs.search_data import FILES, write_bundled
from cookbook.envs.search_grading import answer_reward, normalize_answer
from kitchen.adapters.datasets import HFDatasetStore
from kitchen.adapters.fake.tokenizer import FakeTokenizer
from kitchen.engine.errors import DataError
from tests.agentic.helpers import two_steps
from train_core.completers import TokensWithLogprobs
from train_core.renderers import get_renderer
from train_core.rl import do_group_rollout
from train_core.rl.metrics import trajectory_metrics
from train_core.rl.types import RLEnvContext
from train_core.tool_use import ToolInput

TOKENIZER = FakeTokenizer()
RENDERER = get_renderer("chatml", TOKENIZER)
STORE = HFDatasetStore()


def test_normalisation_and_exact_match_follow_the_cookbook():
    assert normalize_answer("  The Moralkesk, Telescope! ") == "moralkesk telescope"
    assert normalize_answer("An apple a day") == "apple day"
    assert answer_reward("I think...\nAnswer: the Brindus.", ["Brindus"], 0.1) == (
        1.0, {"format": 1.0, "correct": 1.0})  # fmt: skip
    assert answer_reward("Answer: Kelmora", ["Brindus"], 0.1) == (0.0, {"format": 1.0, "correct": 0.0})  # fmt: skip
    no_answer = answer_reward("Brindus", ["Brindus"], 0.1)
    assert no_answer[0] == pytest.approx(-0.1) and no_answer[1]["correct"] == 0.0
    assert answer_reward("Answer: a Answer: Brindus", ["Brindus"], 0.1)[1]["format"] == 0.0


def test_the_bundled_files_are_the_generators_output(tmp_path):
    from cookbook.data import DATA_DIR

    for path in write_bundled(tmp_path):
        assert path.read_bytes() == (DATA_DIR / path.name).read_bytes(), path.name
    assert set(FILES.values()) == {p.name for p in tmp_path.iterdir()}


def test_every_answer_is_in_the_passages_and_none_is_in_its_question():
    passages = " ".join(r["text"] for r in STORE.load("bundled:search", "passages"))
    for split in ("train", "test"):
        for row in STORE.load("bundled:search", split):
            assert any(g in passages for g in row["golden_answers"])
            assert not any(
                normalize_answer(g) in normalize_answer(row["question"])
                for g in row["golden_answers"]
            )


def test_search_r1_rows_read_either_answer_field_and_bad_rows_name_their_place():
    nested = {"question": "q?", "reward_model": {"ground_truth": {"target": ["x"]}},
              "data_source": "nq"}  # fmt: skip
    assert search_task(nested, "r").answers == ("x",) and search_task(nested, "r").source == "nq"
    with pytest.raises(DataError, match="row 7: expected golden_answers"):
        search_task({"question": "q?", "golden_answers": []}, "row 7")


ANSWER_IN = [r"born in (\w+)\.", r"on the (\w+) river", r"remembered for the (.+?)\."]


class Searcher:
    """Searches the question, then answers from the first passage's matching fact."""

    async def __call__(self, model_input, stop, *, max_tokens=None):  # type: ignore[no-untyped-def]
        shown = TOKENIZER.decode(model_input.to_ints())
        if "<|im_start|>tool" not in shown:
            question = shown.rsplit("<|im_start|>user\n", 1)[1].split("<|im_end|>")[0]
            call = {"name": "search", "arguments": {"query_list": [question]}}
            text = f"Let me look that up.\n<tool_call>\n{json.dumps(call)}\n</tool_call>"
        else:
            question = shown.rsplit("Query: ", 1)[1].split("\n")[0]
            first = shown.split("Document 1:\n", 1)[1].split("\n")[0]
            pattern = ANSWER_IN[0 if "born" in question else 1 if "river" in question else 2]
            found = re.search(pattern, first)
            text = f"Answer: {found.group(1) if found else 'unknown'}"
        tokens = TOKENIZER.encode(text + "<|im_end|>")
        return TokensWithLogprobs(tokens, [-0.1] * len(tokens))


class Blind:
    """Answers at once, with the question's last capitalised word."""

    async def __call__(self, model_input, stop, *, max_tokens=None):  # type: ignore[no-untyped-def]
        shown = TOKENIZER.decode(model_input.to_ints()).rsplit("<|im_start|>user\n", 1)[1]
        guess = re.findall(r"[A-Z][a-z]+", shown)[-1]
        tokens = TOKENIZER.encode(f"Answer: {guess}<|im_end|>")
        return TokensWithLogprobs(tokens, [-0.1] * len(tokens))


def rewards_on_the_test_split(policy):  # type: ignore[no-untyped-def]
    _, test = SearchEnvs(1, 1, test_questions=60)(RLEnvContext(RENDERER, TOKENIZER, STORE))
    assert test is not None and len(test.items) == 60

    async def all_groups():
        return await asyncio.gather(*(do_group_rollout(b, policy) for b in test.get_batch(0)))

    groups = asyncio.run(all_groups())
    return [r for g in groups for r in g.get_total_rewards()], groups


def test_a_policy_that_searches_scores_1():
    rewards, groups = rewards_on_the_test_split(Searcher())
    assert rewards == [1.0] * 60
    assert all(len(g.trajectories_G[0].transitions) == 2 for g in groups)  # one search, one answer
    assert trajectory_metrics(groups)["tool_calls_per_episode"] == 1.0


class SearchesTwice(Searcher):
    """Searches the question twice, then answers as Searcher does."""

    async def __call__(self, model_input, stop, *, max_tokens=None):  # type: ignore[no-untyped-def]
        shown = TOKENIZER.decode(model_input.to_ints())
        if shown.count("<|im_start|>tool") == 1:
            question = shown.rsplit("Query: ", 1)[1].split("\n")[0]
            call = {"name": "search", "arguments": {"query_list": [question]}}
            tokens = TOKENIZER.encode(f"<tool_call>\n{json.dumps(call)}\n</tool_call><|im_end|>")
            return TokensWithLogprobs(tokens, [-0.1] * len(tokens))
        return await super().__call__(model_input, stop, max_tokens=max_tokens)


def test_tool_calls_per_episode_counts_every_search_of_an_episode():
    rewards, groups = rewards_on_the_test_split(SearchesTwice())
    metrics = trajectory_metrics(groups)
    assert rewards == [1.0] * 60
    assert (metrics["tool_calls_per_episode"], metrics["tool_calls"]) == (2.0, 1.0)


def test_a_policy_that_answers_blind_scores_0():
    rewards, groups = rewards_on_the_test_split(Blind())
    assert rewards == [0.0] * 60
    assert trajectory_metrics(groups)["tool_calls_per_episode"] == 0.0


def test_bm25_finds_the_passage_naming_the_subject_and_the_tool_formats_results():
    retriever = BM25Retriever(["Oren Vashti was born in Kelmora.", "Kelmora lies on the Ystra.",
                               "Nothing here."])  # fmt: skip
    tool = SearchTool(retriever, k=2).search
    result = asyncio.run(tool.run(ToolInput({"query_list": ["Where was Oren Vashti born?"]})))
    assert result.messages[0]["content"] == (
        "Query: Where was Oren Vashti born?\nDocument 1:\nOren Vashti was born in Kelmora.\n"
    )
    bad = asyncio.run(tool.run(ToolInput({"query_list": "not a list"})))
    assert bad.metadata["error"] == "arguments"


class FakeCollection:
    def __init__(self) -> None:
        self.asked: list[dict[str, object]] = []

    async def query(self, **kwargs):  # type: ignore[no-untyped-def]
        self.asked.append(kwargs)
        return {"documents": [["d1", "d2"]]}


class FakeChroma:
    def __init__(self) -> None:
        self.collection = FakeCollection()

    async def get_collection(self, name):  # type: ignore[no-untyped-def]
        assert name == "wiki_embeddings"
        return self.collection


def test_the_chroma_retriever_queries_by_text_or_by_the_given_embedding():
    async def embed(queries):  # type: ignore[no-untyped-def]
        return [[0.5, 0.5] for _ in queries]

    by_text, by_vector = FakeChroma(), FakeChroma()
    assert asyncio.run(ChromaRetriever("wiki_embeddings", client=by_text).retrieve(["q"], 2)) == [["d1", "d2"]]  # fmt: skip
    asyncio.run(
        ChromaRetriever("wiki_embeddings", embed=embed, client=by_vector).retrieve(["q"], 3)
    )
    assert by_text.collection.asked == [{"query_texts": ["q"], "n_results": 2}]
    assert by_vector.collection.asked == [{"query_embeddings": [[0.5, 0.5]], "n_results": 3}]


@pytest.mark.slow
def test_two_steps_on_the_tiny_model(tmp_path):
    train = two_steps("search_tool", tmp_path, max_tokens=8)
    assert all(r["env/all/total_episodes"] == 4 for r in train)
    assert "search" in (tmp_path / "rollouts" / "iter_000000.jsonl").read_text()
