"""Keep secrets out of files and logs: redact config keys that name credentials, scrub known values.

A key is secret when its words (split on `_`, `-`, `.`, spaces and camelCase) contain secret,
password or apikey, or end in token or api/access/private/auth key (`TINKER_API_KEY`, `apiKey`,
`hf_token`, `client_secret`, `AWS_SECRET_ACCESS_KEY`). Whole words, not substrings, so `max_tokens`,
`tokenizer` and `sort_key` stay readable; special-token names (`eos_token`) are vocabulary.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

SECRET_ENV = (
    "TINKER_API_KEY",
    "WANDB_API_KEY",
    "HF_TOKEN",
    "KITCHEN_API_KEY",
    "KITCHEN_SERVE_API_KEY",
)
REDACTED = "<redacted>"  # in config.json, the registry's records and scrubbed log lines

_SECRET_WORDS = frozenset({"secret", "secrets", "password", "passwd", "apikey", "credentials"})
_KEY_QUALIFIERS = frozenset({"api", "access", "private", "auth", "signing", "secret"})
_SPECIAL_TOKEN_WORDS = frozenset({"bos", "eos", "pad", "unk", "sep", "cls", "mask", "stop", "end"})
_WORD_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def _words(key: str) -> list[str]:
    return [w.lower() for part in re.split(r"[_\-.\s]+", key) for w in _WORD_RE.findall(part)]


def is_secret_key(key: str) -> bool:
    words = _words(key)
    if not words:
        return False
    if _SECRET_WORDS.intersection(words):
        return True
    before_last = words[-2] if len(words) >= 2 else ""
    if words[-1] == "key":
        return before_last in _KEY_QUALIFIERS
    if words[-1] == "token":
        return before_last not in _SPECIAL_TOKEN_WORDS
    return False


def redact(value: Any) -> Any:
    """A deep copy of a (nested) config with every secret key's value replaced by REDACTED, in
    nested dicts and lists (tuples become lists) too. Empty values (None, "") stay as they are: they
    hold no secret and show that none was set."""
    if isinstance(value, dict):
        return {
            k: REDACTED if is_secret_key(str(k)) and v not in (None, "") else redact(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


def secret_values() -> list[str]:
    """The values of the known credential variables and of any variable whose name reads as a
    secret (`OPENAI_API_KEY`, the variable a rubric grader's `--grader-api-key-env` names)."""
    names = set(SECRET_ENV) | {name for name in os.environ if is_secret_key(name)}
    return sorted(v for name in names if len(v := os.environ.get(name, "")) >= 8)


class ScrubSecrets(logging.Filter):
    """Replace any known secret value in a log record's message."""

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = secret_values()
        if secrets:
            msg = record.getMessage()
            for s in secrets:
                msg = msg.replace(s, REDACTED)
            record.msg, record.args = msg, None
        return True
