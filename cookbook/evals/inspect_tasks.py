"""Offline inspect-ai tasks shipped with Kitchen, by name in INSPECT_TASKS (`kitchen eval
--harness inspect --tasks NAME`, chat_sl's `inline_evals=inspect`):

- pip_signoff: the bundled chat test questions; correct when the answer carries Pip's sign-off
  "Happy cooking!" (what the bundled chat data teaches), scored by inspect's `includes`.
- pip_tools: kitchen arithmetic a tool answers (scale a recipe's grams); the model is offered the
  tool, inspect runs the calls it makes, and the final answer must include the number.

Both read only files in cookbook/data or literals here, so they run without a network."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from cookbook.data import DATA_DIR

SIGNOFF = "Happy cooking!"

# (grams in the recipe, servings it makes, servings wanted)
SCALINGS = [(200, 4, 6), (150, 2, 8), (90, 3, 5), (400, 8, 2)]


def pip_signoff() -> Any:
    from inspect_ai import Task
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate

    rows = [json.loads(line) for line in (DATA_DIR / "chat_test.jsonl").read_text().splitlines()]
    samples = []
    for i, row in enumerate(rows):
        messages = row["messages"]
        last = max(j for j, m in enumerate(messages) if m["role"] == "assistant")
        prompt = [m for m in messages[:last] if m["role"] in ("system", "user", "assistant")]
        samples.append(Sample(input=_inspect_messages(prompt), target=SIGNOFF, id=i))
    return Task(dataset=MemoryDataset(samples, name="pip_signoff"), solver=generate(),
                scorer=includes(), name="pip_signoff")  # fmt: skip


def scale_grams() -> Any:
    from inspect_ai.tool import tool

    @tool
    def scale_grams() -> Any:
        async def execute(grams: int, servings: int, wanted: int) -> str:
            """Grams of an ingredient for `wanted` servings of a recipe that makes `servings`.

            Args:
                grams: Grams of the ingredient in the recipe.
                servings: Servings the recipe makes.
                wanted: Servings wanted.
            """
            return str(round(grams * wanted / servings))

        return execute

    return scale_grams()


def pip_tools() -> Any:
    from inspect_ai import Task
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate, use_tools

    samples = [
        Sample(input=f"A recipe for {servings} uses {grams} g of flour. How many grams for "
                     f"{wanted} servings? Use the scale_grams tool.",
               target=str(round(grams * wanted / servings)), id=i)
        for i, (grams, servings, wanted) in enumerate(SCALINGS)
    ]  # fmt: skip
    return Task(dataset=MemoryDataset(samples, name="pip_tools"),
                solver=[use_tools(scale_grams()), generate()], scorer=includes(),
                name="pip_tools", message_limit=6)  # fmt: skip


def _inspect_messages(messages: list[dict[str, Any]]) -> list[Any]:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser,
             "assistant": ChatMessageAssistant}  # fmt: skip
    return [kinds[m["role"]](content=m["content"]) for m in messages]


INSPECT_TASKS: dict[str, Callable[[], Any]] = {"pip_signoff": pip_signoff, "pip_tools": pip_tools}


def inspect_tasks(names: list[str]) -> Callable[[], list[Any]]:
    """A builder of fresh inspect Tasks for `names` (an InspectEvaluator's `tasks`)."""
    from kitchen.engine.errors import ConfigError

    unknown = [n for n in names if n not in INSPECT_TASKS]
    if unknown:
        raise ConfigError(
            f"inspect task {unknown[0]!r}: expected one of {', '.join(sorted(INSPECT_TASKS))}"
        )
    return lambda: [INSPECT_TASKS[n]() for n in names]
