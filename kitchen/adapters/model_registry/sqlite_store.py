"""The default model registry: one SQLite file, safe for concurrent runs on one machine.

Each record is one row written in one `BEGIN IMMEDIATE` transaction: the write lock is taken before
the next version is read, so two processes registering the same name get distinct, gap-free
versions, and a crash at any point leaves either the whole row or nothing (SQLite's journal rolls
back an unfinished transaction on the next open). A file that fails to open is never recreated or
written to: the error names it and says what to do.
"""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from pydantic import ValidationError

from kitchen.adapters.model_registry.lineage import follow_lineage, missing_parent
from kitchen.adapters.model_registry.record import record_fields
from kitchen.ports.model_registry import (
    ModelDraft,
    ModelNotFoundError,
    RegisteredModel,
    RegistryError,
    check_model_name,
)

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE models (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    parent_name TEXT,
    parent_version INTEGER,
    record TEXT NOT NULL,
    UNIQUE (name, version)
);
"""


class SQLiteRegistry:
    """A ModelRegistry in the SQLite file at `path` (created, with its folder, on first register).

    `timeout` is how long (seconds) to wait for another process's lock before failing clearly.
    Reads of a file that does not exist yet see an empty registry and create nothing.
    """

    def __init__(self, path: str | Path, timeout: float = 10.0) -> None:
        self.path = Path(path).expanduser()
        self.location = str(self.path)
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"SQLiteRegistry({self.location!r})"

    # -- connection and error mapping -------------------------------------------------------

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Turn sqlite3 failures into one-line RegistryErrors naming the file and the remedy."""
        try:
            yield
        except sqlite3.OperationalError as err:
            text = str(err)
            if "locked" in text or "busy" in text:
                raise RegistryError(
                    f"model registry {self.location} is locked by another process (waited "
                    f"{self.timeout:g} s while {action}); retry when the other kitchen run or "
                    "sqlite session holding it has finished"
                ) from err
            if "unable to open" in text or "readonly" in text:
                raise RegistryError(
                    f"cannot open model registry {self.location} while {action} ({text}); check "
                    "the path and its permissions, or pass --registry PATH"
                ) from err
            raise self._unreadable(err, action) from err
        except sqlite3.DatabaseError as err:
            raise self._unreadable(err, action) from err

    def _unreadable(self, err: Exception, action: str) -> RegistryError:
        return RegistryError(
            f"model registry {self.location} is not a readable SQLite database ({err}) while "
            f"{action}; the file was left untouched: restore it from a backup, or move it aside "
            "and pass --registry NEW_PATH (or set KITCHEN_REGISTRY)"
        )

    def _connect(self, create: bool, action: str) -> sqlite3.Connection | None:
        """An open, schema-checked connection; None when reading a registry not yet created."""
        if self.path.is_dir():
            raise RegistryError(
                f"model registry {self.location} is a directory; expected a .db file path"
            )
        exists = self.path.exists()
        if not exists and not create:
            return None
        if not exists:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise RegistryError(
                    f"cannot create the folder of model registry {self.location} ({err}); "
                    "pass --registry PATH to a writable place"
                ) from err
        # mode=rw never creates a file; rwc only when it did not exist a moment ago (if another
        # process created it in between, opening an existing file is harmless: nothing truncates).
        mode = "rwc" if not exists else "rw"
        uri = f"file:{quote(str(self.path.resolve()))}?mode={mode}"
        with self._errors(action):
            conn = sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None)
        try:
            with self._errors(action):
                has_schema = self._check_schema(conn, create)
        except BaseException:
            conn.close()
            raise
        if not has_schema:  # an empty file, read before anything was registered
            conn.close()
            return None
        return conn

    def _check_schema(self, conn: sqlite3.Connection, create: bool) -> bool:
        """Whether the kitchen tables are there (created now when `create`)."""
        schema_version = conn.execute("PRAGMA user_version").fetchone()[0]
        if schema_version == SCHEMA_VERSION:
            return True
        if schema_version > SCHEMA_VERSION:
            raise RegistryError(
                f"model registry {self.location} has schema version {schema_version}, newer than "
                f"this kitchen's {SCHEMA_VERSION}; upgrade kitchen to read it"
            )
        if not create:
            self._check_no_foreign_tables(conn)
            return False
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-read under the write lock: another process may have created the schema meanwhile.
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                self._check_no_foreign_tables(conn)
                conn.execute(_SCHEMA)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return True

    def _check_no_foreign_tables(self, conn: sqlite3.Connection) -> None:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        if tables:
            raise RegistryError(
                f"{self.location} is an SQLite database but not a kitchen model registry (it has "
                f"tables {', '.join(sorted(tables))}); pass --registry PATH to another file"
            )

    def _parse(self, record_json: str, where: str) -> RegisteredModel:
        try:
            return RegisteredModel.model_validate_json(record_json)
        except ValidationError as err:
            first = err.errors()[0]
            raise RegistryError(
                f"model registry {self.location}: record {where} is damaged "
                f"({'.'.join(map(str, first['loc']))}: {first['msg']}); restore the file from a "
                "backup or register the model again"
            ) from err

    # -- ModelRegistry -----------------------------------------------------------------------

    def register(self, draft: ModelDraft) -> RegisteredModel:
        conn = self._connect(create=True, action=f"registering {draft.name}")
        assert conn is not None
        try:
            with self._errors(f"registering {draft.name}"):
                conn.execute("BEGIN IMMEDIATE")
                try:
                    record = self._insert(conn, draft)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            return record
        finally:
            conn.close()

    def _insert(self, conn: sqlite3.Connection, draft: ModelDraft) -> RegisteredModel:
        """Under the write lock: check the parent, take the next version, write the one row."""
        if draft.parent is not None:
            found = conn.execute(
                "SELECT 1 FROM models WHERE name = ? AND version = ?",
                (draft.parent.name, draft.parent.version),
            ).fetchone()
            if found is None:
                raise missing_parent(draft, self.location)
        (last,) = conn.execute(
            "SELECT COALESCE(MAX(version), 0) FROM models WHERE name = ?", (draft.name,)
        ).fetchone()
        record = RegisteredModel.model_validate({**record_fields(draft), "version": last + 1})
        conn.execute(
            "INSERT INTO models (id, name, version, created_at, parent_name, parent_version, "
            "record) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                record.id,
                record.name,
                record.version,
                record.created_at,
                record.parent.name if record.parent else None,
                record.parent.version if record.parent else None,
                record.model_dump_json(),
            ),
        )
        return record

    def get(self, name: str, version: int | None = None) -> RegisteredModel:
        check_model_name(name)
        action = f"reading {name}" if version is None else f"reading {name}:{version}"
        conn = self._connect(create=False, action=action)
        if conn is None:
            raise ModelNotFoundError(
                f"no registered model named {name!r}: model registry {self.location} is empty "
                "or does not exist yet (pass --registry PATH or set KITCHEN_REGISTRY to use another)"
            )
        try:
            with self._errors(action):
                if version is None:
                    row = conn.execute(
                        "SELECT record FROM models WHERE name = ? ORDER BY version DESC LIMIT 1",
                        (name,),
                    ).fetchone()
                else:
                    row = conn.execute(
                        "SELECT record FROM models WHERE name = ? AND version = ?", (name, version)
                    ).fetchone()
                latest = None
                if row is None and version is not None:
                    (latest,) = conn.execute(
                        "SELECT MAX(version) FROM models WHERE name = ?", (name,)
                    ).fetchone()
        finally:
            conn.close()
        if row is None:
            raise self._not_found(name, version, latest)
        return self._parse(row[0], f"{name}:{version or 'latest'}")

    def _not_found(self, name: str, version: int | None, latest: int | None) -> ModelNotFoundError:
        if latest is not None:
            return ModelNotFoundError(
                f"model {name} has no version {version} in {self.location} (versions 1 to "
                f"{latest}); `kitchen models list` shows what is registered"
            )
        return ModelNotFoundError(
            f"no registered model named {name!r} in {self.location}; `kitchen models list` "
            "shows what is registered"
        )

    def list(self, name: str | None = None) -> builtins.list[RegisteredModel]:
        conn = self._connect(create=False, action="listing models")
        if conn is None:
            return []
        try:
            with self._errors("listing models"):
                if name is None:
                    rows = conn.execute(
                        "SELECT name, version, record FROM models ORDER BY name, version"
                    ).fetchall()
                else:
                    rows = conn.execute(
                        "SELECT name, version, record FROM models WHERE name = ? ORDER BY version",
                        (check_model_name(name),),
                    ).fetchall()
        finally:
            conn.close()
        return [self._parse(record, f"{n}:{v}") for n, v, record in rows]

    def lineage(self, name: str, version: int | None = None) -> builtins.list[RegisteredModel]:
        return follow_lineage(self.get, name, version)
