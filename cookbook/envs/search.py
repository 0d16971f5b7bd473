"""Search-R1 as a tool env, as tinker-cookbook 0.6.1's search_tool: the model answers a question
with a `search` tool over a passage index (cookbook.envs.retrievers), over up to `max_turns`
turns, and ends with `Answer: ...`; the last reply is graded by exact match after normalisation
(cookbook.envs.search_grading). Tool turns earn 0.

Questions are rows in Search-R1's shape ({"question", "golden_answers" or
"reward_model": {"ground_truth": {"target": [...]}}, "data_source"}): the bundled task
(bundled:search, whose answers only its passages hold) or PeterJinGo/nq_hotpotqa_train.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from cookbook.envs.problem_rows import ItemBatches
from cookbook.envs.retrievers import BM25Retriever, ChromaRetriever, Retriever
from cookbook.envs.search_grading import answer_reward
from kitchen.engine.errors import ConfigError, DataError
from train_core.completers import RendererLike
from train_core.renderers.content import get_text_content
from train_core.renderers.types import Message
from train_core.rl.types import Env, EnvGroupBuilder, RLEnvContext
from train_core.tool_use import (
    AgentToolGroupBuilder,
    Tool,
    ToolBudget,
    ToolProvider,
    agent_tool_env,
    tool,
    tool_conversation,
)

SEARCH_R1 = "PeterJinGo/nq_hotpotqa_train"
BUNDLED = "bundled:search"
TWO_HOP_BUNDLED = "bundled:search_two_hop"  # its answers need two searches (search_data)

INSTRUCTIONS = """You answer questions with the help of a search tool over a collection of \
passages; you know nothing about the question's subject until you have searched.

1. Think about what to look up, then call `search` with one or more queries.
2. Read the passages it returns. If they do not hold the answer, search again with better queries.
3. When you know the answer, reply with it after "Answer:" (one to five words), for example:
Answer: Lake Ostrim"""


@dataclass(frozen=True)
class SearchTask:
    question: str
    answers: tuple[str, ...]
    source: str = "search"


def search_task(row: Mapping[str, Any], where: str) -> SearchTask:
    """One Search-R1 row -> a task; a row without a question or answers is a DataError."""
    question = row.get("question")
    golds: Any = row.get("golden_answers")
    truth = row.get("reward_model")
    if isinstance(truth, Mapping) and "ground_truth" in truth:
        golds = truth["ground_truth"]
        golds = golds.get("target") if isinstance(golds, Mapping) else golds
    if hasattr(golds, "tolist"):  # parquet lists arrive as numpy arrays
        golds = golds.tolist()
    if isinstance(golds, str):
        golds = [golds]
    if not isinstance(question, str) or not question.strip():
        raise DataError(f"{where}: field question is missing or empty")
    if not isinstance(golds, list) or not golds or not all(isinstance(g, str) for g in golds):
        raise DataError(f"{where}: expected golden_answers (or reward_model.ground_truth) to be a "
                        f"non-empty list of strings; got {golds!r}")  # fmt: skip
    return SearchTask(question, tuple(golds), str(row.get("data_source") or "search"))


class SearchTool:
    """The `search` tool over one retriever, `k` passages per query."""

    def __init__(self, retriever: Retriever, k: int = 3) -> None:
        self.retriever, self.k = retriever, k

    @tool
    async def search(
        self,
        query_list: Annotated[
            list[str], "Queries to look up; each returns its best-matching passages."
        ],
    ) -> str:
        """Search the passage collection for information about the question."""
        found = await self.retriever.retrieve(query_list, self.k)
        lines: list[str] = []
        for query, passages in zip(query_list, found, strict=True):
            lines.append(f"Query: {query}")
            for i, passage in enumerate(passages):
                lines += [f"Document {i + 1}:", passage]
            if not passages:
                lines.append("(no passage matches)")
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class SearchSettings:
    """Per-episode knobs (tinker-cookbook's SearchEnvGroupBuilder defaults)."""

    max_turns: int = 5
    format_coef: float = 0.1
    max_trajectory_tokens: int = 32 * 1024
    max_generation_tokens: int | None = None
    context_overflow_reward: float = -0.1


def search_env(task: SearchTask, tools: Sequence[Tool], renderer: RendererLike,
               settings: SearchSettings) -> Env:  # fmt: skip
    prompt: list[Message] = [{"role": "user", "content": task.question}]

    async def reward(messages: list[Message]) -> tuple[float, dict[str, float]]:
        last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
        text = "" if last is None else get_text_content(last)
        reward, metrics = answer_reward(text, task.answers, settings.format_coef)
        # Logged at the episode's end only, so its env/all mean is calls per episode (the
        # per-turn `tool_calls` averages over the turns that called a tool).
        metrics["tool_calls_per_episode"] = float(sum(m["role"] == "tool" for m in messages))
        return reward, metrics

    return agent_tool_env(
        renderer,
        tools,
        tool_conversation(renderer, tools, prompt, INSTRUCTIONS),
        reward,
        budget=ToolBudget(max_turns=settings.max_turns),
        max_trajectory_tokens=settings.max_trajectory_tokens,
        max_generation_tokens=settings.max_generation_tokens,
        context_overflow_reward=settings.context_overflow_reward,
        example_id=task.question,
    )


class SearchDataset(ItemBatches[SearchTask]):
    """Consecutive slices of `tasks`, one group per task, every env on the run's search tool."""

    def __init__(self, tasks: Sequence[SearchTask], renderer: RendererLike, provider: ToolProvider,
                 batch_size: int, group_size: int, settings: SearchSettings) -> None:  # fmt: skip
        super().__init__(tasks, batch_size, self.builder)
        self.renderer, self.provider = renderer, provider
        self.group_size, self.settings = group_size, settings

    def builder(self, task: SearchTask) -> EnvGroupBuilder:
        def make_env(tools: Sequence[Tool]) -> Env:
            return search_env(task, tools, self.renderer, self.settings)

        return AgentToolGroupBuilder(make_env, self.provider, self.group_size, (task.source,))


def load_search_tasks(store: Any, source: str, split: str) -> list[SearchTask]:
    rows = store.load(source, split)
    where = getattr(rows, "where", lambda i: f"{source} ({split}) row {i}")
    tasks = [search_task(row, where(i)) for i, row in enumerate(rows)]
    if not tasks:
        raise DataError(f"search questions {source} ({split}) has no rows")
    return tasks


def bm25_over(store: Any, corpus: str, split: str) -> Retriever:
    """A BM25 index over the rows of `corpus` (split `split`): their `text`, or `contents` as
    Search-R1's Wikipedia dump has it."""
    rows = store.load(corpus, split)
    texts = [str(r.get("text") or r.get("contents") or "") for r in rows]
    if not any(texts):
        raise DataError(f"search corpus {corpus} ({split}) has no passages with text or contents")
    return BM25Retriever([t for t in texts if t])


@dataclass(frozen=True)
class SearchEnvs:
    """RLDatasetFactory: train questions shuffled by `seed`, and the first `test_questions`
    test questions (one sample each, 0 = none). The retriever is made once, here, and shared by
    every env of the run (the tool's lifetime is the run)."""

    groups_per_batch: int
    group_size: int
    dataset: str = BUNDLED
    test_dataset: str | None = BUNDLED
    test_questions: int = 0
    retriever: str = "bm25"
    corpus: str = BUNDLED
    corpus_split: str = "passages"
    chroma: Mapping[str, Any] = field(default_factory=dict)
    n_results: int = 3
    settings: SearchSettings = field(default_factory=SearchSettings)
    seed: int = 0

    def make_retriever(self, store: Any) -> Retriever:
        if self.retriever == "bm25":
            return bm25_over(store, self.corpus, self.corpus_split)
        if self.retriever == "chroma":
            return ChromaRetriever(**dict(self.chroma))
        raise ConfigError(f"retriever {self.retriever!r}; expected bm25 or chroma")

    def __call__(self, ctx: RLEnvContext) -> tuple[SearchDataset, SearchDataset | None]:
        if ctx.datasets is None:
            raise ConfigError("the search env needs a dataset store; none is configured")
        retriever = self.make_retriever(ctx.datasets)
        provider = ToolProvider(lambda: [SearchTool(retriever, self.n_results).search], "run")
        tasks = load_search_tasks(ctx.datasets, self.dataset, "train")
        random.Random(self.seed).shuffle(tasks)
        train = SearchDataset(tasks, ctx.renderer, provider, self.groups_per_batch,
                              self.group_size, self.settings)  # fmt: skip
        if not self.test_questions or self.test_dataset is None:
            return train, None
        test_tasks = load_search_tasks(ctx.datasets, self.test_dataset, "test")
        test_tasks = test_tasks[: self.test_questions]
        return train, SearchDataset(test_tasks, ctx.renderer, provider, len(test_tasks), 1,
                                    self.settings)  # fmt: skip
