"""Chat conversations: `{"messages": [{"role": ..., "content": ...}, ...]}` rows, validated.

Shapes read:
- plain chat JSONL (the bundled `chat`, any local file of that shape);
- `HuggingFaceH4/no_robots`: prompt, prompt_id, messages, category -> messages + category;
- `allenai/tulu-3-sft-mixture`: id, messages, source -> messages + id + source.

Messages come out as plain dicts with a string `content`; the optional keys tinker-cookbook's
`Message` knows (name, tool_calls, tool_call_id, trainable, thinking) are kept as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from cookbook.datasets.fields import bad_field, field_path, missing_field, require
from kitchen.engine.errors import DataError
from train_core.renderers.types import Message

ROLES = ("system", "user", "assistant", "tool")
OPTIONAL_MESSAGE_KEYS = ("name", "tool_calls", "tool_call_id", "trainable", "thinking")
MESSAGES_EXPECTED = 'a non-empty array of {"role", "content"} messages'


def validate_messages(messages: Any, where: str, key: str = "messages") -> list[Message]:
    """Check a conversation and return it as plain message dicts.

    Args:
        messages: the value of the row's `key` field.
        where: the row's locator ("dataset file data/chat.jsonl:17").
        key: the field name, used in error paths ('"messages"[2].role').
    """
    if not isinstance(messages, list | tuple):
        raise bad_field(where, field_path(key), messages, MESSAGES_EXPECTED)
    if not messages:
        raise DataError(f"{where}: field {field_path(key)} is empty; expected {MESSAGES_EXPECTED}")
    return [validate_message(m, where, key, i) for i, m in enumerate(messages)]


def validate_message(message: Any, where: str, key: str, i: int) -> Message:
    if not isinstance(message, Mapping):
        raise bad_field(where, field_path(key, i), message, 'an object {"role", "content"}')
    role = message.get("role")
    if role is None:
        raise missing_field(where, field_path(key, i, "role"), "one of " + ", ".join(ROLES))
    if role not in ROLES:
        raise bad_field(where, field_path(key, i, "role"), role, "one of " + ", ".join(ROLES))
    content = message.get("content")
    if content is None and message.get("tool_calls"):
        content = ""  # an assistant turn that only calls tools has no text (OpenAI format)
    if content is None:
        raise missing_field(where, field_path(key, i, "content"), "a string")
    if not isinstance(content, str):
        raise bad_field(where, field_path(key, i, "content"), content, "a string")
    out: dict[str, Any] = {"role": role, "content": content}
    for extra in OPTIONAL_MESSAGE_KEYS:
        if message.get(extra) is not None:
            out[extra] = message[extra]
    return cast(Message, out)  # a plain dict, as read: "thinking" is a key Message does not type


def chat_row(row: Mapping[str, Any], where: str = "row") -> dict[str, Any]:
    """`{"messages": [...]}` with at least one assistant message to learn from; a ShareGPT row
    `{"conversations": [{"from", "value"}]}` is read as one (sharegpt.py), so a local file of
    either shape trains with any chat recipe."""
    if "messages" not in row and "conversations" in row:
        from cookbook.datasets.sharegpt import sharegpt_row  # sharegpt.py builds on chat_row

        return sharegpt_row(row, where)
    messages = validate_messages(require(row, "messages", where, MESSAGES_EXPECTED), where)
    if not any(m["role"] == "assistant" for m in messages):
        raise DataError(
            f"{where}: field {field_path('messages')} has no assistant message; expected at "
            "least one to train on"
        )
    return {"messages": messages}


def no_robots_row(row: Mapping[str, Any], where: str = "row") -> dict[str, Any]:
    """`HuggingFaceH4/no_robots` -> {"messages", "category"}."""
    out = chat_row(row, where)
    out["category"] = str(row.get("category") or "")
    return out


def tulu3_row(row: Mapping[str, Any], where: str = "row") -> dict[str, Any]:
    """`allenai/tulu-3-sft-mixture` -> {"messages", "id", "source"}."""
    out = chat_row(row, where)
    out["id"] = str(row.get("id") or "")
    out["source"] = str(row.get("source") or "")
    return out
