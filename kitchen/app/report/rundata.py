"""Read a run directory as it is on disk: finished, still being written, or killed.

Every file is optional. A line of a JSONL file that does not parse (the last line of a run that
is still writing, or one cut short by a kill) is skipped and counted, never fatal."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kitchen.engine.errors import ConfigError


@dataclass
class JsonlFile:
    records: list[dict[str, Any]] = field(default_factory=list)
    bad_lines: int = 0
    last_line_partial: bool = False


def read_jsonl(path: Path) -> JsonlFile:
    out = JsonlFile()
    if not path.is_file():
        return out
    lines = path.read_text(errors="replace").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            out.bad_lines += 1
            out.last_line_partial = i == len(lines) - 1
            continue
        if isinstance(record, dict):
            out.records.append(record)
    return out


def number(value: Any) -> float | None:
    """A metric value as a float; None for text, lists and non-finite values (written as text)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


@dataclass
class RunData:
    """Everything the report shows of one run directory."""

    path: Path
    name: str
    recipe: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    plan: str = ""
    metrics: JsonlFile = field(default_factory=JsonlFile)
    # the checkpoints still there; retired rolling ones (deleted) are only counted
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    retired_checkpoints: int = 0
    samples: list[dict[str, Any]] = field(default_factory=list)
    pairs: list[dict[str, Any]] = field(default_factory=list)
    rollouts: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    log_tail: list[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return any(c.get("final") for c in self.checkpoints)

    def series(self) -> dict[str, list[tuple[int, float]]]:
        """Each numeric metric key -> its (step, value) points in file order."""
        out: dict[str, list[tuple[int, float]]] = {}
        for record in self.metrics.records:
            step = record.get("step")
            if not isinstance(step, int):
                continue
            for key, value in record.items():
                v = number(value)
                if key != "step" and v is not None:
                    out.setdefault(key, []).append((step, v))
        return out

    def status(self) -> str:
        steps = {r["step"] for r in self.metrics.records if isinstance(r.get("step"), int)}
        last = f"last step {max(steps)}" if steps else "no metrics yet"
        state = "finished (final checkpoint)" if self.finished else "running or stopped early"
        partial = "; last metrics line incomplete" if self.metrics.last_line_partial else ""
        return f"{state}; {last}{partial}"


def _iteration(path: Path) -> int:
    try:
        return int(path.stem.split("_")[-1])
    except ValueError:
        return -1


def _checkpoints(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The checkpoints of checkpoints.jsonl still there (train_core.checkpoint.live_records:
    no retirement record, none it retired), and how many rolling ones were retired."""
    from train_core.checkpoint import RETIRED_KEY, CheckpointRecord, live_records

    records = [CheckpointRecord.from_dict(r) for r in read_jsonl(path).records if "name" in r]
    retired = sum(1 for r in records if r.get(RETIRED_KEY) is not None)
    return [r.to_dict() for r in live_records(records)], retired


def load_run(path: Path, log_lines: int = 40) -> RunData:
    if not path.is_dir():
        raise ConfigError(f"run directory {path} does not exist")
    known = ("metrics.jsonl", "config.json", "plan.txt", "checkpoints.jsonl", "rollouts")
    if not any((path / name).exists() for name in known):
        raise ConfigError(f"{path} is not a run directory: it has none of {', '.join(known)}")
    run = RunData(path=path, name=path.name or str(path))
    config_file = path / "config.json"
    if config_file.is_file():
        try:
            payload = json.loads(config_file.read_text())
            run.recipe = str(payload.get("recipe", ""))
            run.config = dict(payload.get("config") or {})
        except (json.JSONDecodeError, AttributeError):
            run.config = {}
    if (path / "plan.txt").is_file():
        run.plan = (path / "plan.txt").read_text(errors="replace")
    run.metrics = read_jsonl(path / "metrics.jsonl")
    run.checkpoints, run.retired_checkpoints = _checkpoints(path / "checkpoints.jsonl")
    run.samples = read_jsonl(path / "samples.jsonl").records
    run.pairs = read_jsonl(path / "pairs.jsonl").records
    for file in sorted((path / "rollouts").glob("iter_*.jsonl")):
        run.rollouts[_iteration(file)] = read_jsonl(file).records
    if (path / "logs.log").is_file():
        run.log_tail = (path / "logs.log").read_text(errors="replace").splitlines()[-log_lines:]
    return run


def unique_names(runs: list[RunData]) -> None:
    """Runs in different folders with the same leaf name get their parent folder prepended."""
    names = [r.name for r in runs]
    for run in runs:
        if names.count(run.name) > 1:
            run.name = f"{run.path.parent.name}/{run.path.name}"
