"""Progress over the training steps with each step's headline metric and throughput (tokens/s):
a rich bar on a terminal; elsewhere (a file, CI, nohup, a job scheduler) a plain line at a steady
rate, since a bar redrawn in place shows nothing there until the run ends."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from kitchen.engine.graph import Loop, Workflow
from kitchen.engine.runner import BaseHook
from kitchen.engine.stage import Metrics
from kitchen.engine.state import BaseState

HEADLINE = ("train_mean_nll", "dpo_loss", "env/all/reward/total", "teacher_kl", "loss", "loss:sum")
LINES_PER_LOOP = 10  # off a terminal: a line every tenth of the loop's steps ...
EVERY_SECONDS = 30.0  # ... or after this long without one, whichever comes first


def headline(metrics: Metrics) -> str:
    """The record's headline metric and tokens/s ("" when it has neither)."""
    key = next((k for k in HEADLINE if isinstance(metrics.get(k), (int, float))), None)
    shown = [f"{key}={metrics[key]:.4g}"] if key else []
    if isinstance(metrics.get("tokens_per_second"), (int, float)):
        shown.append(f"{metrics['tokens_per_second']:,.0f} tokens/s")
    return "  ".join(shown)


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"


class ProgressHook(BaseHook):
    def __init__(
        self, console: Console | None = None, every_seconds: float = EVERY_SECONDS
    ) -> None:
        self.console = console or Console(stderr=True)
        self.live = self.console.is_terminal or self.console.is_jupyter
        self.every_seconds = every_seconds
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[metric]}"),
            console=self.console,
            transient=False,
        )
        self.task: Any = None
        # Off a terminal: the loop being counted, its size, and when the last line was printed.
        self.description, self.done, self.total = "", 0, 0
        self.every_steps, self.metric = 1, ""
        self.started = self.last_line = time.monotonic()
        self.last_done = -1

    def on_run_start(self, workflow: Workflow[Any], state: BaseState) -> None:
        self.started = self.last_line = time.monotonic()
        self.description = workflow.name
        if self.live:
            self.progress.start()
            self.task = self.progress.add_task(workflow.name, total=None, metric="")

    def on_loop_start(self, loop: Loop, path: str, total: int, start: int) -> None:
        if not loop.steps:
            return
        self.description = f"{path + '/' if path else ''}{loop.name}"
        self.done, self.total = start, total
        self.every_steps = max(1, total // LINES_PER_LOOP)
        if self.task is not None:
            self.progress.update(
                self.task, total=total, completed=start, description=self.description
            )

    def on_step_end(self, step: int, metrics: Metrics) -> None:
        self.done += 1
        self._show(metrics)
        if self.task is not None:
            self.progress.update(self.task, advance=1)
        elif (
            self.done == 1
            or self.done % self.every_steps == 0
            or self.done == self.total
            or time.monotonic() - self.last_line >= self.every_seconds
        ):
            self._line()

    def on_metrics(self, step: int, metrics: Metrics) -> None:
        self._show(metrics)  # a pipelined step's record arrives after its iteration

    def _show(self, metrics: Metrics) -> None:
        """Keep the latest headline; a record with neither metric nor throughput keeps the last."""
        shown = headline(metrics)
        if not shown:
            return
        self.metric = shown
        if self.task is not None:
            self.progress.update(self.task, metric=shown)

    def _line(self) -> None:
        now = time.monotonic()
        total = f"/{self.total}" if self.total else ""
        parts = [f"{self.description} {self.done}{total}", self.metric, _clock(now - self.started)]
        self.console.print("  ".join(p for p in parts if p), highlight=False, soft_wrap=True)
        self.console.file.flush()
        self.last_line, self.last_done = now, self.done

    def on_run_end(self, state: BaseState, error: BaseException | None) -> None:
        if self.live:
            self.progress.stop()
        elif self.done != self.last_done and self.done:
            self._line()  # where it stopped (--max-steps, an error, the end)
