"""Which row converter reads which chat dataset: names users of tinker-cookbook know, plus
bundled data and local files of {"messages": [...]}."""

from __future__ import annotations

from cookbook.datasets.chat import chat_row, no_robots_row, tulu3_row
from kitchen.workflows.common.setup import RowConverter

CHAT_DATASETS: dict[str, tuple[str, RowConverter]] = {
    "no_robots": ("HuggingFaceH4/no_robots", no_robots_row),
    "tulu3": ("allenai/tulu-3-sft-mixture", tulu3_row),
}


def resolve_chat_dataset(name: str) -> tuple[str, RowConverter]:
    """A short name, a hub name we know the shape of, or anything else read as {messages} rows."""
    if name in CHAT_DATASETS:
        return CHAT_DATASETS[name]
    for source, convert in CHAT_DATASETS.values():
        if name == source:
            return source, convert
    return name, chat_row
