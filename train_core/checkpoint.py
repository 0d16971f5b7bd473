"""checkpoints.jsonl: one record per saved checkpoint, appended durably, read back tolerantly.

The record shape is tinker-cookbook 0.6.1's (`checkpoint_utils.CheckpointRecord`): name, epoch,
batch, final, state_path, sampler_path, with any other loop_state keys (step, elapsed_tokens, ...)
kept at the top level. Here `batch`/`epoch` name the next batch to run on resume, so resuming
neither replays nor skips one. Each append is flushed and fsynced; a last line cut short by a kill
mid-write is ignored on load with a warning and cleared before the next append.

Rolling checkpoints (tinker-cookbook's `rolling_save_every`) are resume-only states recorded with
`rolling: true`; all but the newest few are retired. The file stays append-only: a retirement is a
record of its own (`retired_state_path`), written before the state is deleted, so a reader never
takes a deleted state for a resume point (`live_checkpoint_records`); a backend that can delete
its checkpoints (the Tinker service) deletes remote ones, a folder on this disk is removed here. Every record also names the
renderer the run rendered with (`renderer_name`), read back by a run that starts from it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

CHECKPOINTS_BASE_NAME = "checkpoints.jsonl"
_MISSING = object()


@dataclass
class CheckpointRecord:
    """One line of checkpoints.jsonl; unknown keys round-trip through `extra`."""

    name: str
    batch: int | None = None
    epoch: int | None = None
    final: bool | None = None
    state_path: str | None = None
    sampler_path: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A known key inside extra would be written twice; the typed attribute wins.
        self.extra = {k: v for k, v in self.extra.items() if k not in _KNOWN_KEYS}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: known fields that are set, then the extra keys."""
        out: dict[str, Any] = {"name": self.name}
        for key in ("batch", "epoch", "final", "state_path", "sampler_path"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CheckpointRecord:
        if "name" not in d:
            raise ValueError(f"checkpoint record {d!r} has no 'name'")
        return cls(
            name=d["name"],
            batch=d.get("batch"),
            epoch=d.get("epoch"),
            final=d.get("final"),
            state_path=d.get("state_path"),
            sampler_path=d.get("sampler_path"),
            extra={k: v for k, v in d.items() if k not in _KNOWN_KEYS},
        )

    def has(self, key: str) -> bool:
        """True when the field (known or extra) is present and not None."""
        if key in _KNOWN_KEYS:
            return getattr(self, key) is not None
        return key in self.extra

    def get(self, key: str, default: Any = _MISSING) -> Any:
        if key in _KNOWN_KEYS:
            return getattr(self, key)
        return self.extra.get(key) if default is _MISSING else self.extra.get(key, default)


_KNOWN_KEYS = frozenset(f.name for f in dataclasses.fields(CheckpointRecord) if f.name != "extra")


def checkpoints_file(log_dir: str | Path) -> Path:
    return Path(log_dir) / CHECKPOINTS_BASE_NAME


def make_checkpoint_record(
    name: str,
    loop_state: dict[str, Any],
    paths: dict[str, str],
    final: bool | None = None,
) -> CheckpointRecord:
    """0.6.1's record: {"name", **loop_state, **paths} (paths: state_path and/or sampler_path)."""
    d: dict[str, Any] = {"name": name, **loop_state, **paths}
    if final is not None:
        d["final"] = final
    return CheckpointRecord.from_dict(d)


def _parses(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def _repair_tail(path: Path) -> None:
    """Make the file end with a newline: finish a complete last record, drop a partial one."""
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return
    cut = data.rfind(b"\n") + 1  # 0 when the only line is the partial one
    tail = data[cut:]
    with open(path, "r+b") as f:
        if _parses(tail):
            f.seek(0, os.SEEK_END)
            f.write(b"\n")
        else:
            logger.warning(
                "%s:%d: dropping a truncated last record (a run killed mid-write): %r",
                path,
                data[:cut].count(b"\n") + 1,
                tail[:80],
            )
            f.truncate(cut)
        f.flush()
        os.fsync(f.fileno())


def append_checkpoint_record(log_dir: str | Path, record: CheckpointRecord) -> None:
    """Append one record as a JSON line, flushed and fsynced before returning."""
    path = checkpoints_file(log_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        _repair_tail(path)
    line = json.dumps(record.to_dict()) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def load_checkpoint_records(log_dir: str | Path) -> list[CheckpointRecord]:
    """All records; [] if there is no file. A bad last line is skipped with a warning (a kill
    mid-write); a bad line before it is corruption and raises, naming file:line."""
    path = checkpoints_file(log_dir)
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    records = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            if not isinstance(d, dict):
                raise ValueError("not a JSON object")
            records.append(CheckpointRecord.from_dict(d))
        except ValueError as e:
            if i == last:
                logger.warning(
                    "%s:%d: ignoring a truncated last record (a run killed mid-write?): %s",
                    path,
                    i + 1,
                    e,
                )
                continue
            raise ValueError(f"{path}:{i + 1}: not a checkpoint record: {e}") from e
    return records


def get_last_checkpoint(
    log_dir: str | Path, required_key: str = "state_path"
) -> CheckpointRecord | None:
    """The last record carrying `required_key` (default: a resumable state_path), or None."""
    with_key = [r for r in load_checkpoint_records(log_dir) if r.has(required_key)]
    return with_key[-1] if with_key else None


RETIRED_KEY = "retired_state_path"


def live_checkpoint_records(log_dir: str | Path) -> list[CheckpointRecord]:
    """The records of `log_dir` whose state is still there (`live_records`)."""
    return live_records(load_checkpoint_records(log_dir))


def live_records(records: list[CheckpointRecord]) -> list[CheckpointRecord]:
    """The records (in file order) whose state is still there: every record but the retirements
    and those they retired. A path holds one state: a record saved to a path again (a resumed
    run saves the names it saved before) replaces the earlier one, and a retirement retires the
    record before it with its state_path, not a later one."""
    live: list[CheckpointRecord] = []
    for record in records:
        path = record.get(RETIRED_KEY) or record.state_path
        if path is not None:
            live = [r for r in live if r.state_path != path]
        if record.get(RETIRED_KEY) is None:
            live.append(record)
    return live


def rolling_beyond(records: list[CheckpointRecord], keep: int) -> list[CheckpointRecord]:
    """The rolling records of `records` (in file order) before the newest `keep`."""
    rolling = [r for r in records if r.get("rolling") and r.state_path]
    return rolling[: max(len(rolling) - keep, 0)]


def delete_state(path: str) -> bool:
    """Delete a saved state on this machine's disk (a plain or `local://` folder path); False for
    a state elsewhere (a `tinker://` path: the service keeps it until its own expiry)."""
    folder = Path(path.removeprefix("local://"))
    if "://" in path.removeprefix("local://") or not folder.is_dir():
        return False
    shutil.rmtree(folder, ignore_errors=True)
    return True


def retire_rolling(
    log_dir: str | Path, keep: int, delete: Callable[[str], bool] = delete_state
) -> list[str]:
    """Retire the rolling checkpoints of `log_dir` before the newest `keep`: each is recorded as
    retired, then `delete(state_path)` deletes it (default: on this machine's disk), answering
    whether it did or asked for it. The state paths retired."""
    retired = []
    for record in rolling_beyond(live_checkpoint_records(log_dir), keep):
        assert record.state_path is not None  # rolling_beyond keeps those with one
        append_checkpoint_record(
            log_dir, CheckpointRecord(record.name, extra={RETIRED_KEY: record.state_path})
        )
        if not delete(record.state_path):
            logger.info("rolling checkpoint %s retired; not on this machine, so kept", record.name)
        retired.append(record.state_path)
    return retired


def recorded_renderer(state_path: str, log_dir: str | Path | None = None) -> str | None:
    """The renderer the checkpoint at `state_path` was saved with, from the checkpoints.jsonl of
    `log_dir`, else of the run directory the (local) path lies in; None when no record says."""
    path = state_path.removeprefix("local://")  # the local engine takes either spelling
    folders = [Path(log_dir)] if log_dir is not None else []
    if "://" not in path:  # a local engine's state lies in <log_dir>/checkpoints/weights/<name>
        folders += list(Path(path).parents)[:4]
    for folder in folders:
        if not checkpoints_file(folder).is_file():
            continue
        names = [
            r.get("renderer_name")
            for r in load_checkpoint_records(folder)
            if path in {p.removeprefix("local://") for p in (r.state_path, r.sampler_path) if p}
        ]
        if names:
            return names[-1]
    return None
