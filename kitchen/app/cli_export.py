"""`kitchen export CHECKPOINT --out DIR [--merge] [--dtype]`: a checkpoint as a Hugging Face folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def command(
    checkpoint: Annotated[
        str,
        typer.Argument(
            help="A local checkpoint folder, a tinker://.../sampler_weights/NAME path of "
            "`kitchen serve` (with --checkpoint-dir), or a PEFT adapter folder"
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Folder to write (replaced if it exists)")],
    merge: Annotated[
        bool,
        typer.Option(
            "--merge", help="Write a complete model with the LoRA merged in, not the adapter"
        ),
    ] = False,
    dtype: Annotated[
        str,
        typer.Option("--dtype", help="Weights of the merged model: float32 | bfloat16 | float16"),
    ] = "float32",
    checkpoint_dir: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint-dir", help="kitchen serve's checkpoint dir, to resolve tinker:// paths"
        ),
    ] = None,
) -> None:
    """Export a checkpoint for plain transformers / PEFT (and any tool that reads HF folders)."""
    from kitchen.engine.errors import KitchenError

    try:
        folder = _local_folder(checkpoint, checkpoint_dir)
        from kitchen.adapters.local.clients.export import export_checkpoint

        source = export_checkpoint(folder, out, merge=merge, dtype=dtype)
    except KitchenError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(e.exit_code) from None
    form = "merged model" if merge else "PEFT adapter"
    typer.echo(f"wrote {form} of {source.base_model} to {out}")


def _local_folder(checkpoint: str, checkpoint_dir: Path | None) -> str:
    """tinker:// paths of a local `kitchen serve` -> its folder; anything else as given."""
    if not checkpoint.startswith("tinker://"):
        return checkpoint
    from kitchen.engine.errors import ConfigError

    if checkpoint_dir is None:
        raise ConfigError(
            f"{checkpoint}: pass --checkpoint-dir of the `kitchen serve` that saved it, or, for "
            "the hosted Tinker service, `tinker checkpoint download` it and export the folder"
        )
    from kitchen.serve.errors import UserError
    from kitchen.serve.paths import resolve_checkpoint

    try:
        return resolve_checkpoint(checkpoint, checkpoint_dir / "checkpoints")[0]
    except UserError as e:
        raise ConfigError(str(e)) from None
