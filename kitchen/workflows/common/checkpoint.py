"""Checkpoints: state (weights + optimizer) for resume, sampler weights for serving, each recorded
in checkpoints.jsonl with the loop cursor of the next iteration, so a resume neither replays nor
skips a batch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kitchen.engine.errors import StageError
from kitchen.engine.stage import Context, Metrics


def _record(
    ctx: Context[Any], name: str, paths: dict[str, str], steps_done: int, final: bool | None
) -> None:
    from train_core.checkpoint import (
        append_checkpoint_record,
        checkpoints_file,
        make_checkpoint_record,
    )

    if ctx.log_dir is None:
        return
    cursor = ctx.next_cursor()
    record = make_checkpoint_record(
        name, {**cursor, "step": steps_done, "cursor": cursor}, paths, final=final
    )
    try:
        append_checkpoint_record(ctx.log_dir, record)
    except OSError as e:  # a full disk: the checkpoint exists, but a resume will not use it
        path = checkpoints_file(ctx.log_dir)
        raise StageError(f"cannot write {path}: {e.strerror or e}") from e


@dataclass(frozen=True, kw_only=True)
class SaveCheckpoint:
    """Save a resumable state after this step's optim_step (the pipeline must be drained first)."""

    name: str = "save_checkpoint"
    reads: frozenset[str] = frozenset({"training_client"})
    writes: frozenset[str] = frozenset()
    ports: frozenset[str] = frozenset({"backend"})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        steps_done = ctx.state.step + 1
        result = await ctx.state.training_client.save_state(f"{steps_done:06d}")
        _record(ctx, f"{steps_done:06d}", {"state_path": result.path}, steps_done, None)
        ctx.logger.info("saved checkpoint %s", result.path)
        return None


@dataclass(frozen=True, kw_only=True)
class SaveFinal:
    """Save the final state and sampler weights; recorded with final=true."""

    name: str = "save_final"
    reads: frozenset[str] = frozenset({"training_client"})
    writes: frozenset[str] = frozenset({"final_paths"})
    ports: frozenset[str] = frozenset({"backend"})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        client = ctx.state.training_client
        state = await client.save_state("final")
        sampler = await client.save_weights_for_sampler("final")
        paths = {"state_path": state.path, "sampler_path": sampler.path}
        _record(ctx, "final", paths, ctx.state.step, True)
        ctx.state.final_paths = paths
        return None
