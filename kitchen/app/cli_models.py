"""`kitchen models list|show|lineage`: read the model registry from the command line."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated

import typer

from kitchen.adapters.model_registry.resolve import open_registry
from kitchen.engine.errors import KitchenError
from kitchen.ports.model_registry import RegisteredModel, parse_model_ref

app = typer.Typer(
    name="models",
    help="Registered models: list them, show one, trace its lineage.",
    no_args_is_help=True,
    add_completion=False,
)

RegistryOption = Annotated[
    str | None,
    typer.Option(
        "--registry",
        metavar="PATH",
        help="registry SQLite file, or mlflow:TRACKING_URI "
        "(default: $KITCHEN_REGISTRY, else $XDG_DATA_HOME/kitchen/registry.db)",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="print the records as JSON")]
RefArgument = Annotated[
    str,
    typer.Argument(
        metavar="NAME[:VERSION]", help="a registered model; no :VERSION means the latest"
    ),
]


@contextmanager
def _exit_on_kitchen_error() -> Iterator[None]:
    """One `error:` line on stderr and the error's exit code (2 usage/config, 1 runtime)."""
    try:
        yield
    except KitchenError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(err.exit_code) from err


def _metrics_summary(record: RegisteredModel, limit: int = 4) -> str:
    items = list(record.eval_metrics.items())
    text = " ".join(f"{k}={v:.4g}" for k, v in items[:limit])
    return text + (f" (+{len(items) - limit})" if len(items) > limit else "") or "-"


def _backend(record: RegisteredModel) -> str:
    """The backend that trained it, from its config (a plain name, or a table with a name)."""
    backend = record.config.get("backend")
    if isinstance(backend, dict):
        backend = backend.get("name")
    return str(backend) if backend else "-"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    head = "  ".join(cell.ljust(w) for cell, w in zip(header, widths, strict=True))
    return "\n".join(line.rstrip() for line in [head, *lines])


def _print_json(records: list[RegisteredModel]) -> None:
    typer.echo(json.dumps([r.model_dump(mode="json") for r in records], indent=2))


@app.command("list")
def list_models(
    name: Annotated[str | None, typer.Argument(help="only the versions of this name")] = None,
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """List registered models (every version), oldest first within each name."""
    with _exit_on_kitchen_error():
        store = open_registry(registry)
        records = store.list(name)
    if as_json:
        _print_json(records)
        return
    if not records:
        what = f"named {name!r} " if name else ""
        typer.echo(f"no registered models {what}in {store.location}")
        return
    rows = [
        [
            str(r.ref),
            r.recipe,
            _backend(r),
            r.base_model,
            str(r.parent) if r.parent else "-",
            r.created_at,
            r.log_dir or "-",
            _metrics_summary(r),
        ]
        for r in records
    ]
    header = ["MODEL", "RECIPE", "BACKEND", "BASE MODEL", "PARENT", "CREATED", "RUN DIR", "EVAL"]
    typer.echo(_table(header, rows))


@app.command("show")
def show_model(
    ref: RefArgument, registry: RegistryOption = None, as_json: JsonOption = False
) -> None:
    """Show one registered model: every field, eval metrics and the (redacted) config."""
    with _exit_on_kitchen_error():
        name, version = parse_model_ref(ref)
        record = open_registry(registry).get(name, version)
    if as_json:
        typer.echo(record.model_dump_json(indent=2))
        return
    datasets = [
        d.name
        + "".join(f" {k}={v}" for k, v in (("split", d.split), ("fingerprint", d.fingerprint)) if v)
        for d in record.datasets
    ]
    fields = [
        ("model", str(record.ref)),
        ("id", record.id),
        ("created_at", record.created_at),
        ("base_model", record.base_model),
        ("recipe", record.recipe),
        ("parent", str(record.parent) if record.parent else "-"),
        ("datasets", "; ".join(datasets) or "-"),
        ("state_path", record.state_path or "-"),
        ("sampler_path", record.sampler_path or "-"),
        ("log_dir", record.log_dir or "-"),
        ("config_hash", record.config_hash),
    ]
    for key, value in fields:
        typer.echo(f"{key + ':':<14}{value}")
    typer.echo("eval_metrics:" + ("" if record.eval_metrics else " -"))
    for key, metric in record.eval_metrics.items():
        typer.echo(f"  {key}: {metric:.6g}")
    typer.echo("config:")
    typer.echo("\n".join("  " + line for line in json.dumps(record.config, indent=2).splitlines()))


@app.command("lineage")
def model_lineage(
    ref: RefArgument, registry: RegistryOption = None, as_json: JsonOption = False
) -> None:
    """Trace a model back through the registered models it was trained from, to its base model."""
    with _exit_on_kitchen_error():
        name, version = parse_model_ref(ref)
        chain = open_registry(registry).lineage(name, version)
    if as_json:
        _print_json(chain)
        return
    rows = [
        [str(r.ref), r.recipe, r.created_at, r.state_path or r.sampler_path or "-"] for r in chain
    ]
    typer.echo(_table(["MODEL (newest first)", "RECIPE", "CREATED", "CHECKPOINT"], rows))
    typer.echo(f"base model: {chain[-1].base_model}")
