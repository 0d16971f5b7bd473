"""Secret redaction, the config hash, and the fields every store adds to a draft it registers.

A key is secret when its words (split on `_`, `-`, `.`, spaces and camelCase) contain secret,
password or apikey, or end in token or api/access/private/auth key (`TINKER_API_KEY`, `apiKey`,
`hf_token`, `client_secret`, `AWS_SECRET_ACCESS_KEY`). Matching whole words, not substrings, keeps
`max_tokens`, `tokenizer` and `sort_key` readable; special-token names (`eos_token`, `pad_token`)
are vocabulary, not secrets.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime
from typing import Any

from kitchen.engine.errors import ConfigError
from kitchen.engine.secrets import is_secret_key
from kitchen.ports.model_registry import ModelDraft

REDACTED = "<redacted>"


def redact(config: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of `config` with every secret key's value replaced by "<redacted>", in nested
    dicts and lists too. Empty values (None, "") stay as they are: they hold no secret and show
    that none was set."""
    return {key: _redact_value(key, value) for key, value in config.items()}


def _redact_value(key: Any, value: Any) -> Any:
    if isinstance(key, str) and is_secret_key(key) and value not in (None, ""):
        return REDACTED
    if isinstance(value, dict):
        return redact(value)
    if isinstance(value, list | tuple):
        return [_redact_value(None, item) for item in value]
    return value


def canonical_json(config: dict[str, Any]) -> str:
    """Sorted keys, no whitespace, UTF-8 text: equal configs give equal strings."""
    try:
        return json.dumps(
            config, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except (TypeError, ValueError) as err:
        raise ConfigError(
            f"run config is not plain JSON ({err}); expected a dict of str, numbers, bools, "
            "None, lists and dicts (e.g. Config.model_dump(mode='json'))"
        ) from err


def config_hash(config: dict[str, Any]) -> str:
    """sha256 hex of the canonical JSON of the redacted config, so the same settings hash the same
    whatever credentials the run used."""
    return hashlib.sha256(canonical_json(redact(config)).encode("utf-8")).hexdigest()


def record_fields(draft: ModelDraft) -> dict[str, Any]:
    """A draft as a store records it (JSON-ready): redacted config, its hash, a fresh id and the
    registration time; the store adds the version."""
    return {
        **draft.model_dump(mode="json"),
        "config": redact(draft.config),
        "id": uuid.uuid4().hex,
        "config_hash": config_hash(draft.config),
        "created_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
    }
