"""Running a recipe or a workflow: the Python API behind `kitchen run`.

result = kitchen.run("sl_basic", {"learning_rate": 2e-4}, backend="fake", log_dir="runs/x")
result.state  # the final typed state
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import kitchen.app.builtins  # noqa: F401  (registers the built-in adapters)
from kitchen.adapters.local.distributed.relaunch import Launch as Ranks
from kitchen.adapters.local.distributed.relaunch import relaunched
from kitchen.app.resolve import Resolved, needed_ports, open_ports, opened_here, resolve_config
from kitchen.app.rundir import (
    IfExists,
    attach_log_file,
    detach_log_file,
    discard,
    prepare,
    resume_record,
    truncate_metrics,
    write_config,
    write_plan,
)
from kitchen.app.sinks import JsonlSink, MemorySink, MetricsHook, wandb_sink
from kitchen.app.trackers import open_trackers
from kitchen.engine import cores
from kitchen.engine.errors import BackendError, ConfigError
from kitchen.engine.graph import Workflow
from kitchen.engine.plugins import BACKENDS, DATASET_STORES
from kitchen.engine.recipe import Recipe
from kitchen.engine.runner import BaseHook, Hook, Runner, RunResult
from kitchen.engine.stage import Context, Metrics, Resume
from kitchen.engine.validate import validate
from kitchen.ports import BackendSettings, DatasetStore, TrainingBackend
from kitchen.workflows.common.config import TrainConfig

log = logging.getLogger("kitchen")


def make_backend(
    name_or_backend: str | TrainingBackend, settings: BackendSettings
) -> TrainingBackend:
    if not isinstance(name_or_backend, str):
        return name_or_backend
    factory = BACKENDS.get(name_or_backend)
    backend: TrainingBackend = factory(settings)
    return backend


def read_resume(log_dir: Path) -> Resume | None:
    """The last usable checkpoint record (rundir.resume_record), as a resume point; None when
    there is none."""
    record = resume_record(log_dir)
    if record is None or not record.state_path:
        return None
    cursor = record.get("cursor", None)
    if cursor is None:  # a record written by tinker-cookbook: its loop state is epoch/batch
        cursor = {k: int(record.get(k)) for k in ("epoch", "batch") if record.get(k) is not None}
    return Resume(
        cursor=dict(cursor),
        step=int(record.get("step", 0) or 0),
        state_path=record.state_path,
        sampler_path=record.sampler_path,
    )


def resume_folder(folder: Path) -> Resume | None:
    """Where a run directory resumes; its metrics.jsonl loses the rows of the steps it will redo."""
    resume = read_resume(folder)
    log.info("resuming %s from %s", folder, resume)
    truncate_metrics(folder / "metrics.jsonl", resume.step if resume else 0)
    return resume


def open_folder(
    folder: Path, hooks: Sequence[Hook], progress: bool
) -> tuple[Resume | None, list[Hook]]:
    """A folder inside a run (a section's) as a run directory of its own: its resume point and
    the hooks of a run into it (the caller's `hooks`, a metrics.jsonl, the progress bar)."""
    resume = resume_folder(folder) if folder.is_dir() and any(folder.iterdir()) else None
    folder.mkdir(parents=True, exist_ok=True)
    out = [*hooks, MetricsHook([JsonlSink(folder / "metrics.jsonl")])]
    if progress:
        from kitchen.app.progress import ProgressHook

        out.append(ProgressHook())
    return resume, out


@dataclass
class Launch:
    """Everything a run needs besides the workflow. Built by `run` and `run_workflow`."""

    backend: str | TrainingBackend = "local"
    log_dir: Path | None = None
    if_exists: IfExists = "raise"
    max_steps: int | None = None
    progress: bool = False
    hooks: Sequence[Hook] = ()
    datasets: DatasetStore | None = None
    ports: dict[str, Any] = field(default_factory=dict)
    closes: list[Any] = field(default_factory=list)  # ports opened for this run, closed after it
    settings: BackendSettings = field(default_factory=BackendSettings)
    config: dict[str, Any] = field(default_factory=dict)  # for config.json
    recipe_name: str = ""
    wandb: tuple[str, str | None] | None = None
    announce: Callable[[str], None] | None = None  # the CLI's start lines (stderr)


class _FirstStep(BaseHook):
    """Whether the run finished a training step: before one, a failed run has nothing to keep."""

    def __init__(self) -> None:
        self.seen = False

    def on_step_end(self, step: int, metrics: Metrics) -> None:
        self.seen = True


def run_launch(workflow: Workflow[Any], launch: Launch) -> RunResult:
    """Validate, prepare the run directory, create the adapters, run; the adapters are closed
    after. A run that fails before its first step leaves no run directory it created behind."""
    validate(workflow, ports={"backend", "datasets", *launch.ports})
    first_step = _FirstStep()
    hooks: list[Hook] = [*launch.hooks, first_step]
    fresh = created = False
    handler = None
    log_dir = Path(launch.log_dir) if launch.log_dir is not None else None
    try:
        if log_dir is not None:
            created = not log_dir.exists()
            resuming = prepare(log_dir, launch.if_exists)
            created = created or not log_dir.exists()  # "delete" removed it: this run makes it
            fresh = not resuming
            handler = attach_log_file(log_dir)
            return _run_in(workflow, launch, hooks, log_dir, resuming)
        return _run_in(workflow, launch, hooks, None, False)
    except BaseException:
        if handler is not None:
            detach_log_file(handler)
            handler = None
        if log_dir is not None and fresh and not first_step.seen:
            discard(log_dir, created)
        raise
    finally:
        if handler is not None:
            detach_log_file(handler)
        for port in launch.closes:
            port.close()


def _run_in(
    workflow: Workflow[Any],
    launch: Launch,
    hooks: list[Hook],
    log_dir: Path | None,
    resuming: bool,
) -> RunResult:
    """The run itself, into `log_dir` (prepared) or none."""
    resume: Resume | None = None
    memory = MemorySink()
    sinks: list[Any] = [memory]
    if log_dir is not None:
        if resuming:
            resume = resume_folder(log_dir)
        write_plan(log_dir, workflow.render())
        sinks.append(JsonlSink(log_dir / "metrics.jsonl"))
        launch.settings.log_dir = log_dir
    if launch.wandb:
        project, name = launch.wandb
        sinks.append(wandb_sink(project, name, launch.config, log_dir, resuming))
    sinks.extend(open_trackers(launch.config))
    hooks.append(MetricsHook(sinks))
    if launch.progress:
        from kitchen.app.progress import ProgressHook

        hooks.append(ProgressHook())
    backend = make_backend(launch.backend, launch.settings)
    try:
        # Written once the backend exists: config.json records the dtype `--dtype auto` resolved to.
        dtype = getattr(backend, "dtype_name", None)
        if dtype is not None:
            log.info("training dtype: %s", dtype)
            if cores.decided is not None:  # why a step may be slower than on an idle machine
                wait = cores.decided.value or "unchanged"
                log.info("OpenMP wait policy: %s (%s)", wait, cores.decided.reason)
            if launch.announce is not None:
                launch.announce(f"compute dtype {dtype} (--dtype {launch.settings.dtype})")
        if log_dir is not None:
            write_config(log_dir, launch.recipe_name or workflow.name, launch.config, dtype)
        datasets = launch.datasets or DATASET_STORES.get("hf")()
        ctx = Context(
            state=workflow.state(),
            backend=backend,
            datasets=datasets,
            ports=launch.ports,
            log_dir=launch.log_dir,
            resume=resume,
            open_folder=partial(open_folder, hooks=launch.hooks, progress=launch.progress),
        )
        result = asyncio.run(Runner(workflow, ctx, hooks, launch.max_steps).run())
        result.metrics = memory.records
        return result
    finally:
        backend.close()


def run(
    recipe: str | Recipe[Any] | Resolved,
    config: TrainConfig | Mapping[str, Any] | None = None,
    *,
    backend: str | TrainingBackend | None = None,
    log_dir: str | Path | None = None,
    if_exists: IfExists | None = None,
    max_steps: int | None = None,
    progress: bool = False,
    hooks: Sequence[Hook] = (),
    ports: dict[str, Any] | None = None,
    datasets: DatasetStore | None = None,
    announce: Callable[[str], None] | None = None,
    nproc: int = 1,
    nnodes: int = 1,
    node_rank: int = 0,
    rdzv_endpoint: str | None = None,
) -> RunResult:
    """Run a registered recipe (by name or instance) with a config (object or overrides), or a run
    resolve_config resolved (`kitchen run`); `announce` gets the lines a person starting the run
    should see (the compute dtype). `nproc`, `nnodes`, `node_rank` and `rdzv_endpoint` are `kitchen
    run`'s flags of those names: ranks of the local engine, in processes of their own
    (_run_on_ranks). `if_exists` and `max_steps` unset: the config's run keys
    (behavior_if_log_dir_exists, max_steps) say, else "raise" and no limit."""
    ranks = Ranks(nproc, nnodes, node_rank, rdzv_endpoint)
    if isinstance(recipe, Resolved):
        if config is not None or backend is not None or log_dir is not None:
            raise TypeError("run(resolved): its config, backend and log_dir are resolved already")
        resolved = recipe
    else:
        resolved = resolve_config(recipe, values=config, backend=backend, log_dir=log_dir)
    if_exists = if_exists or resolved.run.if_exists or "raise"
    max_steps = max_steps if max_steps is not None else resolved.run.max_steps
    if ranks.distributed and not relaunched():
        given = {"hooks": hooks, "ports": ports, "datasets": datasets, "announce": announce}
        return _run_on_ranks(resolved, ranks, [k for k, v in given.items() if v], if_exists,
                             max_steps, progress)  # fmt: skip
    cfg = resolved.config
    opened = open_ports(resolved.ports, cfg.registry, ports, cfg)
    launch = Launch(
        backend=resolved.backend,
        log_dir=resolved.log_dir,
        if_exists=if_exists,
        max_steps=max_steps,
        progress=progress,
        hooks=hooks,
        ports=opened,
        closes=opened_here(opened, ports),
        datasets=datasets,
        settings=BackendSettings(
            seed=cfg.seed,
            base_url=cfg.base_url,
            dtype=cfg.dtype,
            extra={
                "activation_checkpointing": cfg.activation_checkpointing,
                "packing": cfg.packing,
                "context_length": cfg.context_length,
                "rope_scaling": cfg.rope_scaling,
                "sampler": cfg.sampler,
                "vllm_urls": list(cfg.vllm_url),
                "vllm_gpu_memory_utilization": cfg.vllm_gpu_memory_utilization,
                "base_quantization": cfg.base_quantization,
                "spread_sampling": cfg.spread_sampling,
            },
        ),
        config=json.loads(cfg.model_dump_json()),
        recipe_name=resolved.recipe.name,
        wandb=(cfg.wandb_project, cfg.wandb_name) if cfg.wandb_project else None,
        announce=announce,
    )
    return run_launch(resolved.workflow, launch)


def _run_on_ranks(
    resolved: Resolved,
    ranks: Ranks,
    given: list[str],
    if_exists: IfExists,
    max_steps: int | None,
    progress: bool,
) -> RunResult:
    """The run as `kitchen run` runs it with these ranks (kitchen/app/rank_flags.py): each rank is a
    process of its own, rank 0 runs the recipe by its name and config, and the run directory is
    what comes back. The result's steps and metrics are read from it; its state is a fresh one of
    the workflow at that step, as the run's own stayed in rank 0's process (what it trained is in
    the run directory's checkpoints)."""
    import tempfile

    from kitchen.app import rank_flags
    from kitchen.engine.plugins import RECIPES

    where = f"run(nproc={ranks.nproc}, nnodes={ranks.nnodes})"
    name = resolved.recipe.name
    if given:
        raise ConfigError(
            f"{where}: {', '.join(given)} cannot reach the ranks, which run in processes of "
            "their own; pass names and config values only"
        )
    if resolved.backend != "local":
        raise ConfigError(
            f"{where}: ranks are of the local engine; backend is {resolved.backend!r}"
        )
    if name not in RECIPES.names():
        raise ConfigError(
            f"{where}: each rank runs the recipe by its registered name; {name!r} is not one"
        )
    if resolved.log_dir is None:
        raise ConfigError(f"{where} needs a log_dir: the run directory is what comes back")
    log_dir = Path(resolved.log_dir)
    with tempfile.TemporaryDirectory(prefix="kitchen-ranks-") as tmp:
        config_file = Path(tmp) / "config.json"
        config_file.write_text(resolved.config.model_dump_json())
        argv = ["run", name, "--config", str(config_file), "--log-dir", str(log_dir),
                "--if-exists", if_exists, "--nproc", str(ranks.nproc), "--nnodes", str(ranks.nnodes),
                "--node-rank", str(ranks.node_rank)]  # fmt: skip
        argv += ["--rdzv-endpoint", ranks.rdzv_endpoint] if ranks.rdzv_endpoint else []
        argv += ["--max-steps", str(max_steps)] if max_steps is not None else []
        argv += [] if progress else ["--no-progress"]
        code = rank_flags.start(ranks, argv)
    if code:
        raise BackendError(f"{where}: the run exited with code {code} (the ranks' lines say why)")
    rows = [json.loads(line) for line in (log_dir / "metrics.jsonl").read_text().splitlines()]
    state = resolved.workflow.state()
    state.step = 1 + max((int(r["step"]) for r in rows), default=-1)  # rows count steps from 0
    return RunResult(state=state, steps=state.step, metrics=rows)


def run_workflow(
    workflow: Workflow[Any],
    *,
    backend: str | TrainingBackend = "local",
    log_dir: str | Path | None = None,
    if_exists: IfExists = "raise",
    max_steps: int | None = None,
    hooks: Sequence[Hook] = (),
    ports: dict[str, Any] | None = None,
    datasets: DatasetStore | None = None,
    seed: int = 0,
    base_url: str | None = None,
    progress: bool = False,
) -> RunResult:
    """Run a Workflow object you built (public as `kitchen.run_workflow`): validate it, open the
    backend by name (or use the object given) and, with a `log_dir`, write the run directory.
    A workflow that registers its model gets the default model registry unless `ports` has one."""
    launch = Launch(
        backend=backend,
        log_dir=Path(log_dir) if log_dir is not None else None,
        if_exists=if_exists,
        max_steps=max_steps,
        progress=progress,
        hooks=hooks,
        datasets=datasets,
        ports=(opened := open_ports(needed_ports(workflow), None, ports)),
        closes=opened_here(opened, ports),
        settings=BackendSettings(seed=seed, base_url=base_url),
        recipe_name=workflow.name,
    )
    return run_launch(workflow, launch)
