"""Checkpoints: state (weights + optimizer) for resume, sampler weights for serving, each recorded
in checkpoints.jsonl with the loop cursor of the next iteration and the renderer the run renders
with, so a resume neither replays nor skips a batch and a run started from one can check its
chat format. Rolling checkpoints (resume-only, the newest few kept) are tinker-cookbook's
`rolling_save_every`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kitchen.engine.errors import BackendError, StageError
from kitchen.engine.graph import Every, Node, When
from kitchen.engine.stage import Context, Metrics
from kitchen.workflows.common.config import CheckpointConfig


def _record(
    ctx: Context[Any],
    name: str,
    paths: dict[str, str],
    steps_done: int,
    final: bool | None,
    rolling: bool = False,
) -> None:
    from train_core.checkpoint import (
        append_checkpoint_record,
        checkpoints_file,
        make_checkpoint_record,
    )

    if ctx.log_dir is None:
        return
    cursor = ctx.next_cursor()
    loop_state: dict[str, Any] = {**cursor, "step": steps_done, "cursor": cursor}
    # a renderer built by name carries it (train_core.renderers.get_renderer); an env's own may not
    renderer = getattr(ctx.state.renderer, "_renderer_name", None)
    if renderer is not None:
        loop_state["renderer_name"] = renderer
    if rolling:
        loop_state["rolling"] = True
    record = make_checkpoint_record(name, loop_state, paths, final=final)
    try:
        append_checkpoint_record(ctx.log_dir, record)
    except OSError as e:  # a full disk: the checkpoint exists, but a resume will not use it
        path = checkpoints_file(ctx.log_dir)
        raise StageError(f"cannot write {path}: {e.strerror or e}") from e


async def _retire_rolling(ctx: Context[Any], keep: int) -> None:
    """Record the rolling checkpoints before the newest `keep` as retired, then delete them: by
    the backend where it can delete its checkpoints (CheckpointDeleter: Tinker's, the fake's),
    else where they lie on this disk (the local engine's folders). A deletion that fails is a
    warning: the run goes on, the record says retired, and the service's expiry removes it."""
    from kitchen.ports import CheckpointDeleter
    from train_core.checkpoint import delete_state, retire_rolling

    if ctx.log_dir is None:
        return
    backend = ctx.backend
    asked: list[tuple[str, Any]] = []

    def delete(path: str) -> bool:
        if isinstance(backend, CheckpointDeleter):
            asked.append((path, backend.delete_checkpoint(path)))
            return True
        return delete_state(path)

    for path in retire_rolling(ctx.log_dir, keep, delete):
        ctx.logger.info("retired rolling checkpoint %s", path)
    for path, future in asked:
        try:
            await future
        except BackendError as e:
            ctx.logger.warning("rolling checkpoint %s retired but not deleted: %s", path, e)


@dataclass(frozen=True, kw_only=True)
class SaveCheckpoint:
    """Save a resumable state after this step's optim_step (the pipeline must be drained first).
    With `keep`, a rolling one: resume-only (no sampler weights), skipped on the steps the periodic
    checkpoint (every `periodic_every` steps) saves, and the rolling ones before the newest `keep`
    are retired after it. A run killed between this record and its step's metrics line resumes
    from an older checkpoint (the rolling one before, with keep > 1), as exactly as from any."""

    keep: int | None = None  # None: the periodic checkpoint, kept for good
    periodic_every: int = 0
    name: str = "save_checkpoint"
    reads: frozenset[str] = frozenset({"training_client", "renderer"})
    writes: frozenset[str] = frozenset()
    ports: frozenset[str] = frozenset({"backend"})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        steps_done = ctx.state.step + 1
        rolling = self.keep is not None
        if rolling and self.periodic_every and steps_done % self.periodic_every == 0:
            return None  # as tinker-cookbook: the periodic checkpoint resumes this step
        result = await ctx.state.training_client.save_state(f"{steps_done:06d}")
        paths = {"state_path": result.path}
        _record(ctx, f"{steps_done:06d}", paths, steps_done, None, rolling=rolling)
        if self.keep is None:
            ctx.logger.info("saved checkpoint %s", result.path)
        else:
            await _retire_rolling(ctx, self.keep)
        return None


def rolling_checkpoints(cfg: CheckpointConfig, before: list[Node] | None = None) -> list[Node]:
    """The rolling checkpoint of a step loop (none when `rolling_save_every` is 0), after the
    nodes `before` it (a pipelined loop's drain)."""
    if not cfg.rolling_save_every:
        return []
    save = SaveCheckpoint(
        keep=cfg.rolling_keep, periodic_every=cfg.save_every, name="save_rolling_checkpoint"
    )
    return [When(Every(cfg.rolling_save_every, "step"), [*(before or []), save])]


@dataclass(frozen=True, kw_only=True)
class SaveFinal:
    """Save the final state and sampler weights; recorded with final=true. The rolling
    checkpoints left are retired first, as tinker-cookbook retires them: the final one resumes
    the run."""

    name: str = "save_final"
    reads: frozenset[str] = frozenset({"training_client", "renderer"})
    writes: frozenset[str] = frozenset({"final_paths"})
    ports: frozenset[str] = frozenset({"backend"})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        client = ctx.state.training_client
        state = await client.save_state("final")
        sampler = await client.save_weights_for_sampler("final")
        paths = {"state_path": state.path, "sampler_path": sampler.path}
        await _retire_rolling(ctx, 0)  # before the final record, so that it stays the last line
        _record(ctx, "final", paths, ctx.state.step, True)
        ctx.state.final_paths = paths
        return None
