"""Tool-use demonstrations for a warm start of search_tool: each a chat as the search env shows
it (the renderer's tool declaration and INSTRUCTIONS, the question), the assistant's `search`
call with the question as its query, the real retriever's result as the tool message, and the
final `Answer: <gold>`. Built from the TRAIN split only, so the RL run's test questions stay
unseen; a question whose retrieved passages lack every gold answer is left out (the demo would
teach answering without evidence).

`search_demos(store)` returns the rows ({"messages": [...]}, sl_basic's conversation shape);
scripts/search_tool_demos.py writes them as JSONL."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Sequence
from typing import Any

from cookbook.envs.search import (
    BUNDLED,
    INSTRUCTIONS,
    SearchTask,
    SearchTool,
    bm25_over,
    load_search_tasks,
)
from train_core.renderers.types import Message
from train_core.tool_use import ToolInput, tool_conversation


def call_text(queries: Sequence[str]) -> str:
    """The assistant's search turn, as the chatml renderer renders a reply with one tool call."""
    payload = {"name": "search", "arguments": {"query_list": list(queries)}}
    return f"Let me search for that.\n<tool_call>\n{json.dumps(payload)}\n</tool_call>"


def demo(task: SearchTask, tool: SearchTool, renderer: Any) -> list[Message] | None:
    """One demonstration of `task`, or None when the search result holds no gold answer."""
    prompt: list[Message] = [{"role": "user", "content": task.question}]
    messages = tool_conversation(renderer, [tool.search], prompt, INSTRUCTIONS)
    result = asyncio.run(tool.search.run(ToolInput({"query_list": [task.question]})))
    found = str(result.messages[0]["content"])
    answer = next((g for g in task.answers if g in found), None)
    if answer is None:
        return None
    return [
        *messages,
        {"role": "assistant", "content": call_text([task.question])},
        {"role": "tool", "content": found},
        {"role": "assistant", "content": f"Answer: {answer}"},
    ]


def search_demos(store: Any, renderer: Any, *, dataset: str = BUNDLED, corpus: str = BUNDLED,
                 corpus_split: str = "passages", n_results: int = 3, seed: int = 0,
                 limit: int | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Demonstrations of `dataset`'s train questions, shuffled by `seed`, at most `limit`."""
    tool = SearchTool(bm25_over(store, corpus, corpus_split), n_results)
    tasks = load_search_tasks(store, dataset, "train")
    random.Random(seed).shuffle(tasks)
    rows = [{"messages": m} for t in tasks if (m := demo(t, tool, renderer)) is not None]
    return rows[:limit]
