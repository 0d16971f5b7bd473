"""Tool-use demonstrations for a warm start of search_tool: each a chat as the search env shows
it (the renderer's tool declaration and INSTRUCTIONS, the question), the assistant's `search`
call with the question as its query, the real retriever's result as the tool message, and the
final `Answer: <gold>`; on the two-hop task (bundled:search_two_hop) a second search, for the
founder the first result names, comes before the answer. Built from the TRAIN split only, so
the RL run's test questions stay unseen; a question whose retrieved passages lack every gold answer is left out (the demo would
teach answering without evidence).

`search_demos(store)` returns the rows ({"messages": [...]}, sl_basic's conversation shape);
scripts/search_tool_demos.py writes them as JSONL."""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Callable, Sequence
from typing import Any

from cookbook.envs.search import (
    BUNDLED,
    INSTRUCTIONS,
    TWO_HOP_BUNDLED,
    SearchTask,
    SearchTool,
    bm25_over,
    load_search_tasks,
)
from train_core.renderers.types import Message
from train_core.tool_use import ToolInput, tool_conversation


def call_text(queries: Sequence[str], lead: str = "Let me search for that.") -> str:
    """The assistant's search turn, as the chatml renderer renders a reply with one tool call."""
    payload = {"name": "search", "arguments": {"query_list": list(queries)}}
    return f"{lead}\n<tool_call>\n{json.dumps(payload)}\n</tool_call>"


# The bundled two-hop task's institution passage, as cookbook.envs.search_data writes it.
FOUNDER = re.compile(r"was established by (.+?) in \d{4}\.")


def founder_query(found: str) -> str | None:
    """bundled:search_two_hop's second query: the founder the first search's best passage names."""
    best = found.split("Document 1:\n", 1)[-1].split("\n", 1)[0]
    match = FOUNDER.search(best)
    return match.group(1) if match else None


FollowUp = Callable[[str], str | None]


def demo(task: SearchTask, tool: SearchTool, renderer: Any,
         follow_ups: Sequence[FollowUp] = ()) -> list[Message] | None:  # fmt: skip
    """One demonstration of `task`: a search for the question, then one search per follow-up
    (each reads its query from the result before it), then the answer; None when a follow-up
    finds no query or the last result holds no gold answer."""
    prompt: list[Message] = [{"role": "user", "content": task.question}]
    messages = tool_conversation(renderer, [tool.search], prompt, INSTRUCTIONS)
    query: str | None = task.question
    lead = "Let me search for that."
    for follow_up in (*follow_ups, None):
        if query is None:
            return None
        result = asyncio.run(tool.search.run(ToolInput({"query_list": [query]})))
        found = str(result.messages[0]["content"])
        messages += [{"role": "assistant", "content": call_text([query], lead)},
                     {"role": "tool", "content": found}]  # fmt: skip
        query = follow_up(found) if follow_up else None
        lead = f"The passage names {query}. Let me search for {query}."
    answer = next((g for g in task.answers if g in found), None)
    if answer is None:
        return None
    return [*messages, {"role": "assistant", "content": f"Answer: {answer}"}]


def search_demos(store: Any, renderer: Any, *, dataset: str = BUNDLED, corpus: str = BUNDLED,
                 corpus_split: str = "passages", n_results: int = 3, seed: int = 0,
                 limit: int | None = None,
                 follow_ups: Sequence[FollowUp] = ()) -> list[dict[str, Any]]:  # fmt: skip
    """Demonstrations of `dataset`'s train questions, shuffled by `seed`, at most `limit`."""
    tool = SearchTool(bm25_over(store, corpus, corpus_split), n_results)
    tasks = load_search_tasks(store, dataset, "train")
    random.Random(seed).shuffle(tasks)
    rows = [
        {"messages": m} for t in tasks if (m := demo(t, tool, renderer, follow_ups)) is not None
    ]
    return rows[:limit]


def two_hop_demos(store: Any, renderer: Any, **options: Any) -> list[dict[str, Any]]:
    """Demonstrations of bundled:search_two_hop: search the question, then the founder."""
    return search_demos(store, renderer, dataset=TWO_HOP_BUNDLED, corpus=TWO_HOP_BUNDLED,
                        follow_ups=(founder_query,), **options)  # fmt: skip
