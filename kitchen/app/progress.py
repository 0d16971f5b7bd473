"""A rich progress bar over the training steps, showing each step's headline metric and its
throughput (tokens/s)."""

from __future__ import annotations

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


class ProgressHook(BaseHook):
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
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

    def on_run_start(self, workflow: Workflow[Any], state: BaseState) -> None:
        self.progress.start()
        self.task = self.progress.add_task(workflow.name, total=None, metric="")

    def on_loop_start(self, loop: Loop, path: str, total: int, start: int) -> None:
        if loop.steps and self.task is not None:
            self.progress.update(
                self.task,
                total=total,
                completed=start,
                description=f"{path + '/' if path else ''}{loop.name}",
            )

    def on_step_end(self, step: int, metrics: Metrics) -> None:
        self.progress.update(self.task, advance=1)
        self._show(metrics)

    def on_metrics(self, step: int, metrics: Metrics) -> None:
        self._show(metrics)  # a pipelined step's record arrives after its iteration

    def _show(self, metrics: Metrics) -> None:
        """The record's headline metric and tokens/s; a record with neither keeps the text."""
        if self.task is None:
            return
        headline = next((k for k in HEADLINE if isinstance(metrics.get(k), (int, float))), None)
        shown = [f"{headline}={metrics[headline]:.4g}"] if headline else []
        if isinstance(metrics.get("tokens_per_second"), (int, float)):
            shown.append(f"{metrics['tokens_per_second']:,.0f} tokens/s")
        if shown:
            self.progress.update(self.task, metric="  ".join(shown))

    def on_run_end(self, state: BaseState, error: BaseException | None) -> None:
        self.progress.stop()
