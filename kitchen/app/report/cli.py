"""`kitchen report RUN_DIR [RUN_DIR ...] [-o FILE]` (mounted by kitchen/app/cli.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def command(
    run_dirs: Annotated[list[Path], typer.Argument(help="Run directories; several are overlaid")],
    output: Annotated[
        Path | None,
        typer.Option(
            "-o", "--output", help="HTML file (default: report.html in the first run dir)"
        ),
    ] = None,
    max_iterations: Annotated[
        int, typer.Option("--max-iterations", min=2, help="RL iterations shown, evenly spaced")
    ] = 40,
    max_groups: Annotated[
        int, typer.Option("--max-groups", min=1, help="Env groups shown per RL iteration")
    ] = 8,
) -> None:
    """One self-contained HTML page (works offline): curves of every metric family, runs overlaid
    with their config diff, plan, checkpoints, final evaluation and transcripts."""
    from rich.console import Console

    from kitchen.app.report import write_report
    from kitchen.engine.errors import KitchenError

    try:
        path = write_report(run_dirs, output, max_iterations, max_groups)
    except KitchenError as e:
        Console(stderr=True).print(f"[red]error:[/red] {e}", highlight=False, soft_wrap=True)
        raise typer.Exit(e.exit_code) from None
    typer.echo(f"report: {path}")
