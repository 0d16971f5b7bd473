"""A section: a whole workflow run inside a larger run, in its own folder `<log_dir>/<section>`
with its own config-free metrics.jsonl and checkpoints.jsonl (tinker-cookbook's rlhf_pipeline runs
its three stages the same way, each reading the previous one's checkpoints.jsonl).

A section whose checkpoints.jsonl already holds a final record is done: it is skipped, its paths
are read from that record and its summary (the final evaluation, results.json) is logged again;
one with only intermediate records resumes as a run does (`Context.open_folder`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from kitchen.engine.errors import ConfigError, StageError
from kitchen.engine.files import replace_text
from kitchen.engine.graph import Workflow
from kitchen.engine.runner import Runner
from kitchen.engine.stage import Context, Metrics, Resume, stage_ports
from kitchen.engine.validate import walk
from kitchen.workflows.common.naming import name_by_default

SectionPaths = dict[str, dict[str, str]]
"""section name -> {"state_path", "sampler_path"} of its final checkpoint."""

SectionBuilder = Callable[[SectionPaths, Any], Workflow[Any]]
"""(paths of the earlier sections, the backend) -> the section's workflow. Called at run time,
when the earlier sections' paths exist; with placeholder paths and no backend for the plan."""


class _Prefixed:
    """A training client or backend whose checkpoints are named `<section>_<name>`: sections share
    one backend (and so one checkpoint folder), and each saves its own "final"."""

    def __init__(self, inner: Any, prefix: str) -> None:
        self._inner, self._prefix = inner, prefix

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name.startswith("create_") and "training_client" in name:
            return lambda *a, **k: _Prefixed(attr(*a, **k), self._prefix)
        if name in ("save_state", "save_weights_for_sampler"):
            return lambda checkpoint, *a, **k: attr(f"{self._prefix}_{checkpoint}", *a, **k)
        return attr


def final_paths(folder: Path) -> dict[str, str] | None:
    """The paths of the final record in `folder`'s checkpoints.jsonl, or None while unfinished."""
    from train_core.checkpoint import load_checkpoint_records

    if not (folder / "checkpoints.jsonl").exists():
        return None
    finals = [r for r in load_checkpoint_records(folder) if r.final and r.sampler_path]
    if not finals:
        return None
    return {"state_path": str(finals[-1].state_path), "sampler_path": str(finals[-1].sampler_path)}


@dataclass(frozen=True, kw_only=True)
class RunSection:
    """Run the workflow `build` makes from the earlier sections' paths, as section `section`."""

    section: str
    build: SectionBuilder
    needs: tuple[str, ...] = ()
    name: str = field(default="", repr=False)
    reads: frozenset[str] = frozenset({"section_paths"})
    writes: frozenset[str] = frozenset({"section_paths"})

    def __post_init__(self) -> None:
        name_by_default(self, f"section_{self.section}")

    @cached_property
    def ports(self) -> frozenset[str]:
        """The ports its workflow's stages need: a run opens them as it does for its own."""
        plan = self.plan()
        needed = {p for node, _ in walk([*plan.nodes, *plan.finally_]) for p in stage_ports(node)}
        return frozenset({"backend", "datasets", *needed})

    def plan(self) -> Workflow[Any]:
        """The section's workflow with placeholder paths, for --dry-run and validation (the plan
        renders it under this node)."""
        paths = {s: {"state_path": f"<{s} final state>", "sampler_path": f"<{s} final sampler>"}
                 for s in self.needs}  # fmt: skip
        return self.build(paths, None)

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        paths = dict(ctx.state.section_paths)
        if ctx.log_dir is not None:  # an earlier section finished by an earlier run of this one
            for need in set(self.needs) - set(paths):
                found = final_paths(Path(ctx.log_dir) / need)
                paths.update({need: found} if found else {})
        missing = [s for s in self.needs if s not in paths]
        if missing:
            raise ConfigError(f"section {self.section} needs {', '.join(missing)} to finish first")
        folder = Path(ctx.log_dir) / self.section if ctx.log_dir is not None else None
        done = final_paths(folder) if folder is not None else None
        if done is not None and folder is not None:
            ctx.logger.info("section %s: already finished (%s)", self.section, folder)
            ctx.state.section_paths = {**paths, self.section: done}
            # logged again, so a resumed run's metrics.jsonl holds it as a run never stopped does
            logged = folder / "results.json"
            return json.loads(logged.read_text()) if logged.exists() else None
        workflow = self.build(paths, ctx.require_backend())
        resume: Resume | None = None
        hooks: list[Any] = []
        if folder is not None and ctx.open_folder is not None:  # metrics.jsonl, --progress
            resume, hooks = ctx.open_folder(folder)
            replace_text(folder / "plan.txt", workflow.render() + "\n")
        backend = _Prefixed(ctx.backend, self.section)
        sub = Context(state=workflow.state(), backend=backend, datasets=ctx.datasets,
                      ports=ctx.ports, log_dir=folder, logger=ctx.logger, resume=resume,
                      open_folder=ctx.open_folder)  # fmt: skip
        ctx.logger.info("section %s: %s", self.section, workflow.name)
        result = await Runner(workflow, sub, hooks, ctx.max_steps).run()
        written = final_paths(folder) if folder is not None else None
        handed_on = written or getattr(result.state, "final_paths", None)
        if not handed_on:
            raise StageError(f"section {self.section} ended without a final checkpoint")
        ctx.state.section_paths = {**paths, self.section: handed_on}
        results = getattr(result.state, "eval_results", {})
        summary = {f"{self.section}/{k}": v for k, v in results.items()}
        if folder is not None:
            replace_text(folder / "results.json", json.dumps(summary, default=float))
        return summary
