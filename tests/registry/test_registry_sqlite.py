"""The SQLite registry: records, versions, lineage, atomicity, and clear errors that lose nothing."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from kitchen.adapters.model_registry import SQLiteRegistry
from kitchen.engine.errors import ConfigError
from kitchen.ports.model_registry import (
    ModelNotFoundError,
    ModelRef,
    RegistryError,
    parse_model_ref,
)
from tests.registry.drafts import make_draft


@pytest.fixture
def registry(tmp_path: Path) -> SQLiteRegistry:
    return SQLiteRegistry(tmp_path / "data" / "registry.db", timeout=0.3)


def test_register_then_get_round_trips_every_field(registry: SQLiteRegistry) -> None:
    draft = make_draft()
    record = registry.register(draft)
    assert record.version == 1 and len(record.id) == 32
    assert datetime.fromisoformat(record.created_at).utcoffset() == UTC.utcoffset(None)
    assert registry.get("tuned") == record == registry.get("tuned", 1)
    for field in ("base_model", "recipe", "datasets", "state_path", "sampler_path", "log_dir"):
        assert getattr(record, field) == getattr(draft, field)
    assert record.eval_metrics == {"accuracy": 0.75, "f1": 0.5}


def test_config_is_stored_redacted_and_hashed_canonically(registry: SQLiteRegistry) -> None:
    record = registry.register(make_draft())
    assert record.config["backend"] == {"name": "tinker", "api_key": "<redacted>"}
    assert record.config["max_tokens"] == 64
    canonical = json.dumps(record.config, sort_keys=True, separators=(",", ":"))
    assert record.config_hash == hashlib.sha256(canonical.encode()).hexdigest()
    assert b"tml-SECRET-123" not in registry.path.read_bytes()


def test_versions_increment_per_name_and_latest_is_default(registry: SQLiteRegistry) -> None:
    versions = [registry.register(make_draft(name)).version for name in ["a", "b", "a", "a", "b"]]
    assert versions == [1, 1, 2, 3, 2]
    assert registry.get("a").version == 3
    assert registry.get("b", 1).version == 1
    assert [str(r.ref) for r in registry.list()] == ["a:1", "a:2", "a:3", "b:1", "b:2"]
    assert [r.version for r in registry.list("b")] == [1, 2]


def test_second_model_trained_from_first_shows_two_step_lineage(registry: SQLiteRegistry) -> None:
    first = registry.register(make_draft("sft"))
    second = registry.register(make_draft("dpo-tuned", parent=first.ref, recipe="dpo"))
    chain = registry.lineage("dpo-tuned", 1)
    assert [str(r.ref) for r in chain] == ["dpo-tuned:1", "sft:1"]
    assert chain[0] == second and chain[-1].parent is None
    assert [str(r.ref) for r in registry.lineage("sft")] == ["sft:1"]


def test_unknown_name_or_version_is_a_usage_error_naming_the_registry(
    registry: SQLiteRegistry,
) -> None:
    with pytest.raises(ModelNotFoundError, match="does not exist yet") as missing_file:
        registry.get("nope")
    assert missing_file.value.exit_code == 2
    assert registry.list() == [] and not registry.path.exists()  # reading creates nothing
    registry.register(make_draft("tuned"))
    with pytest.raises(
        ModelNotFoundError, match=r"no registered model named 'nope' in .*registry\.db"
    ):
        registry.get("nope")
    with pytest.raises(ModelNotFoundError, match=r"has no version 5 .*versions 1 to 1"):
        registry.get("tuned", 5)


def test_parent_must_be_registered_and_a_refused_record_writes_nothing(
    registry: SQLiteRegistry,
) -> None:
    registry.register(make_draft("base"))
    with pytest.raises(ModelNotFoundError, match="parent model base:7"):
        registry.register(make_draft("child", parent=ModelRef(name="base", version=7)))
    assert [str(r.ref) for r in registry.list()] == ["base:1"]


def test_bad_names_and_refs_are_rejected() -> None:
    with pytest.raises(ValidationError):
        make_draft("has:colon")
    assert parse_model_ref("m-1.a_b:12") == ("m-1.a_b", 12)
    assert parse_model_ref("m") == ("m", None)
    with pytest.raises(ConfigError, match="not a positive integer"):
        parse_model_ref("m:0")
    with pytest.raises(ConfigError, match="model name"):
        parse_model_ref("bad name:1")


def _insert_then_die(path: str) -> None:
    """Run in a child: the row is inserted inside the transaction, then the process dies."""
    original = SQLiteRegistry._insert

    def insert_and_die(self, conn, draft):  # type: ignore[no-untyped-def]
        original(self, conn, draft)
        os._exit(17)

    SQLiteRegistry._insert = insert_and_die  # type: ignore[method-assign]
    SQLiteRegistry(path).register(make_draft("crashy"))


def test_crash_inside_registration_leaves_no_half_record(registry: SQLiteRegistry) -> None:
    registry.register(make_draft("kept"))
    child = multiprocessing.get_context("spawn").Process(
        target=_insert_then_die, args=(str(registry.path),)
    )
    child.start()
    child.join(60)
    assert child.exitcode == 17
    assert [str(r.ref) for r in registry.list()] == ["kept:1"]
    assert registry.register(make_draft("crashy")).version == 1  # lock released, no gap


def test_garbage_file_gives_clear_error_and_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "registry.db"
    garbage = bytes(range(256)) * 40
    path.write_bytes(garbage)
    registry = SQLiteRegistry(path, timeout=0.3)
    for attempt in (
        registry.list,
        lambda: registry.get("x"),
        lambda: registry.register(make_draft()),
    ):
        with pytest.raises(
            RegistryError, match=r"registry\.db is not a readable SQLite database"
        ) as err:
            attempt()
        assert "left untouched" in str(err.value) and "--registry" in str(err.value)
        assert err.value.exit_code == 1
    assert path.read_bytes() == garbage
    assert sorted(p.name for p in tmp_path.iterdir()) == ["registry.db"]


def test_damaged_registry_keeps_its_records_for_recovery(registry: SQLiteRegistry) -> None:
    records = [registry.register(make_draft("m")) for _ in range(3)]
    original = registry.path.read_bytes()
    damaged = b"\xde\xad\xbe\xef" * 4 + original[16:]  # the SQLite header magic is gone
    registry.path.write_bytes(damaged)
    with pytest.raises(RegistryError, match="not a readable SQLite database"):
        registry.register(make_draft("m"))
    assert registry.path.read_bytes() == damaged
    registry.path.write_bytes(original[:16] + registry.path.read_bytes()[16:])  # repair header
    assert SQLiteRegistry(registry.path).list() == records


def test_locked_registry_gives_clear_error_and_loses_nothing(registry: SQLiteRegistry) -> None:
    before = [registry.register(make_draft("m")) for _ in range(2)]
    holder = sqlite3.connect(registry.path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(
            RegistryError, match=r"registry\.db is locked by another process"
        ) as err:
            registry.register(make_draft("m"))
        assert "waited 0.3 s" in str(err.value)
        with pytest.raises(RegistryError, match="is locked"):
            registry.list()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert SQLiteRegistry(registry.path).list() == before
    assert registry.register(make_draft("m")).version == 3


def test_foreign_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.close()
    original = path.read_bytes()
    with pytest.raises(RegistryError, match="not a kitchen model registry"):
        SQLiteRegistry(path).register(make_draft())
    assert path.read_bytes() == original


def test_empty_file_becomes_a_registry(tmp_path: Path) -> None:
    path = tmp_path / "registry.db"
    path.touch()
    assert SQLiteRegistry(path).list() == []
    assert SQLiteRegistry(path).register(make_draft()).version == 1
