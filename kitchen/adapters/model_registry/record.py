"""What every store adds to a draft it registers: the redacted config (`kitchen.engine.secrets`,
the same redaction as a run's config.json), its hash, an id and the registration time."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime
from typing import Any

from kitchen.engine.errors import ConfigError
from kitchen.engine.secrets import redact
from kitchen.ports.model_registry import ModelDraft


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
