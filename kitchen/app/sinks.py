"""Metrics sinks (jsonl always, optional wandb) and the hook that feeds them."""

from __future__ import annotations

import contextlib
import json
import math
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kitchen.engine.files import writing
from kitchen.engine.runner import BaseHook
from kitchen.engine.stage import Metrics
from kitchen.engine.state import BaseState
from kitchen.ports import MetricsSink


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if hasattr(value, "item"):
        return _clean(value.item())
    return value


class JsonlSink:
    """One line per record in metrics.jsonl, written and flushed at once. A write that fails (a
    full disk) stops the run with the path named; a line it cut short is dropped on resume."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with writing(path):
            self._file = path.open("a")

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        record = {"step": step, **{k: _clean(v) for k, v in metrics.items()}}
        line = json.dumps(record) + "\n"
        with writing(self.path):
            try:
                self._file.write(line)
                self._file.flush()
            except OSError:
                self._abandon()
                raise

    def _abandon(self) -> None:
        """Close without flushing again: what the failed write left stays as it is on disk."""
        with contextlib.suppress(OSError):
            os.close(self._file.fileno())
        with contextlib.suppress(OSError, ValueError):
            self._file.close()

    def close(self) -> None:
        with writing(self.path):
            self._file.close()


class RunSink:
    """A tracker with W&B's run API: `init(project=, name=, config=)` opens the run, then
    `run.log(metrics, step=)` and `run.finish()`. W&B logs every metric; Trackio, its local-first
    drop-in (kitchen/app/trackers.py), keeps only the numeric ones (`keep`)."""

    def __init__(
        self,
        init: Callable[..., Any],
        project: str,
        name: str | None,
        config: dict[str, Any],
        keep: Callable[[Mapping[str, Any]], dict[str, Any]] = dict,
        **init_options: Any,
    ) -> None:
        self._run = init(project=project, name=name, config=config, **init_options)
        self._keep = keep

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        self._run.log(self._keep(metrics), step=step)

    def close(self) -> None:
        self._run.finish()


WANDB_ID_FILE = "wandb_run_id"


def wandb_sink(
    project: str,
    name: str | None,
    config: dict[str, Any],
    log_dir: Path | None = None,
    resuming: bool = False,
) -> RunSink:
    """A W&B run. With a run directory, the run's W&B id is kept there (`wandb_run_id`), so a
    resumed run (`--if-exists resume`) continues the same W&B run instead of starting a second."""
    import wandb  # optional dependency

    options: dict[str, Any] = wandb_identity(log_dir, resuming) if log_dir is not None else {}
    return RunSink(wandb.init, project, name, config, **options)


def wandb_identity(log_dir: Path, resuming: bool) -> dict[str, str]:
    """`wandb.init`'s id (and resume) for a run directory: on resume the id its first start kept
    ("allow": that start may have stopped before W&B created the run); else a new one, kept."""
    path = log_dir / WANDB_ID_FILE
    if resuming and path.is_file():
        return {"id": path.read_text().strip(), "resume": "allow"}
    run_id = uuid.uuid4().hex[:16]  # W&B's own ids are letters and digits too
    with writing(path):
        path.write_text(run_id + "\n")
    return {"id": run_id}


class MemorySink:
    """Keeps records in memory: for tests and the Python API's result."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        self.records.append({"step": step, **metrics})

    def close(self) -> None:
        pass


class MetricsHook(BaseHook):
    """Per step: the metrics every stage of the step returned, as one record, to every sink."""

    def __init__(self, sinks: Sequence[MetricsSink]) -> None:
        self.sinks = list(sinks)
        self._resumed_setup = False

    def on_run_start(self, workflow: Any, state: BaseState) -> None:
        # A resumed run starts past step 0; its setup stages (everything before the first loop)
        # report what the first run already logged at step 0: not logged again at the resume step.
        self._resumed_setup = state.step > 0

    def on_loop_start(self, loop: Any, path: str, total: int, start: int) -> None:
        self._resumed_setup = False

    def on_step_end(self, step: int, metrics: Metrics) -> None:
        if set(metrics) <= {"time/total"}:
            return  # a pipelined step reports its metrics later, with its step number
        for sink in self.sinks:
            sink.log(metrics, step)

    def on_metrics(self, step: int, metrics: Metrics) -> None:
        if self._resumed_setup:
            return
        for sink in self.sinks:
            sink.log(metrics, step)

    def on_run_end(self, state: BaseState, error: BaseException | None) -> None:
        for sink in self.sinks:
            sink.close()
