"""A rich progress bar over the training steps, showing the headline metric of each step."""

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
        shown = next(
            (f"{k}={metrics[k]:.4g}" for k in HEADLINE if isinstance(metrics.get(k), (int, float))),
            "",
        )
        self.progress.update(self.task, advance=1, metric=shown)

    def on_run_end(self, state: BaseState, error: BaseException | None) -> None:
        self.progress.stop()
