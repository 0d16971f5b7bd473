"""`kitchen sandbox run FILE`: run one program in the sandbox and print its verdict as JSON, for
people debugging graders and test cases. Mounted on the main CLI with
`app.add_typer(cli_sandbox.app, name="sandbox")`.

Exit status: 0 when the program's verdict is ok, 1 for any other verdict, 2 for bad usage or a
sandbox that cannot start here.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from kitchen.adapters.sandbox import KINDS, make_sandbox
from kitchen.ports.sandbox import Limits, SandboxError

app = typer.Typer(
    name="sandbox",
    help="Run programs in Kitchen's code-execution sandbox.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _group() -> None:
    """Run programs in Kitchen's code-execution sandbox."""


def _head(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars] + f"...[{len(text) - chars} more chars]"


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        typer.echo(f"error: {what} {path}: {e}", err=True)
        raise typer.Exit(2) from e


@app.command("run")
def run(
    file: Path = typer.Argument(..., help="the Python program to run"),
    stdin: Path | None = typer.Option(None, "--stdin", help="file fed to the program's stdin"),
    timeout: float = typer.Option(10.0, "--timeout", min=0.01, help="wall-clock limit, seconds"),
    memory: int = typer.Option(512, "--memory", min=1, help="address-space limit, MiB"),
    kind: str = typer.Option(
        "local", "--sandbox", "--backend", help=f"where it runs: one of {', '.join(KINDS)}"
    ),
    head: int = typer.Option(4000, "--head", min=0, help="characters of stdout/stderr to print"),
) -> None:
    """Run FILE in the sandbox; print exit code, reason, output heads, wall and CPU time and peak
    memory as one JSON object."""
    program = _read(file, "program")
    stdin_text = _read(stdin, "stdin file") if stdin is not None else ""
    try:
        sandbox = make_sandbox(kind)
        result = sandbox.run(
            program, stdin=stdin_text, limits=Limits(wall_s=timeout, memory_mb=memory)
        )
    except SandboxError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from e
    verdict = {
        "exit_code": result.exit_code,
        "reason": result.reason,
        "stdout": _head(result.stdout, head),
        "stderr": _head(result.stderr, head),
        "stdout_truncated": result.stdout_truncated or len(result.stdout) > head,
        "stderr_truncated": result.stderr_truncated or len(result.stderr) > head,
        "wall_s": result.wall_s,
        "cpu_s": result.cpu_s,
        "peak_memory_mb": result.peak_memory_mb,
    }
    typer.echo(json.dumps(verdict))
    raise typer.Exit(0 if result.ok else 1)
