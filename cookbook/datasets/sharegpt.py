"""ShareGPT conversations -> the chat shape {"messages": [{"role", "content"}, ...]}.

ShareGPT rows (OpenThoughts3-1.2M, the off_policy_reasoning data of tinker-cookbook 0.6.1, and
many others) hold {"conversations": [{"from": "human" | "gpt" | "system", "value": str}, ...]}.
The speaker names map to roles by `SPEAKERS` (tinker-cookbook maps "human" to user and every
other speaker to assistant; here "system" stays a system message and an unknown speaker is an
error naming its row, never a guess). The other fields of the row (OpenThoughts3's "difficulty",
"source", "domain") are kept when they are strings or numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cookbook.datasets.chat import chat_row
from cookbook.datasets.fields import bad_field, field_path, require

SPEAKERS = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "model": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "tool",
}

TURNS_EXPECTED = 'a non-empty array of {"from", "value"} turns'


def sharegpt_row(row: Mapping[str, Any], where: str = "row") -> dict[str, Any]:
    """{"conversations": [{"from", "value"}]} -> {"messages": [{"role", "content"}]} (plus the
    row's scalar metadata)."""
    turns = require(row, "conversations", where, TURNS_EXPECTED)
    if not isinstance(turns, list) or not turns:
        raise bad_field(where, field_path("conversations"), turns, TURNS_EXPECTED)
    messages = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, Mapping):
            raise bad_field(where, field_path("conversations", i), turn, '{"from", "value"}')
        speaker = turn.get("from")
        if speaker not in SPEAKERS:
            raise bad_field(
                where,
                field_path("conversations", i, "from"),
                speaker,
                "one of " + ", ".join(SPEAKERS),
            )
        value = turn.get("value")
        if not isinstance(value, str):
            raise bad_field(where, field_path("conversations", i, "value"), value, "a string")
        messages.append({"role": SPEAKERS[str(speaker)], "content": value})
    out = chat_row({"messages": messages}, where)
    for key, value in row.items():
        if key != "conversations" and isinstance(value, (str, int, float)) and key not in out:
            out[key] = value
    return out
