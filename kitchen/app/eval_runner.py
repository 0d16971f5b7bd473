"""The benchmark runner: every checkpoint of a run directory (checkpoints.jsonl) answers
each named benchmark (a task from the EVAL_TASKS plugin table: cookbook's gsm8k, math500; or an
inspect-ai task from INSPECT_TASKS: pip_signoff, pip_tools), and pass@k is appended per (checkpoint, benchmark) to the run's eval store,
eval_store.jsonl. A (checkpoint, benchmark, settings) already in the store is not evaluated again,
so running it after more checkpoints were saved scores only the new ones."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

from kitchen.engine.errors import DataError
from kitchen.engine.plugins import EVAL_TASKS, INSPECT_TASKS
from kitchen.ports import DatasetStore, TrainingBackend
from train_core.evaluation.benchmark import BenchmarkEvaluator, BenchmarkTask

EVAL_STORE = "eval_store.jsonl"


@dataclass(frozen=True)
class BenchmarkSettings:
    """How every checkpoint is sampled; part of a stored result's identity."""

    num_samples: int = 4
    ks: tuple[int, ...] = (1, 4)
    max_tokens: int = 256
    temperature: float = 1.0
    source: Literal["bundled", "hub"] = "bundled"  # the tasks' offline slices, or their hub sets
    limit: int | None = None


def run_checkpoints(run_dir: Path) -> list[dict[str, Any]]:
    """The run's checkpoints in the order they were saved."""
    path = run_dir / "checkpoints.jsonl"
    if not path.is_file():
        raise DataError(f"{run_dir}: no checkpoints.jsonl; expected a Kitchen run directory")
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in records if r.get("sampler_path") or r.get("state_path")]


def sampling_client(backend: TrainingBackend, record: dict[str, Any]) -> Any:
    """A sampling client of a checkpoint's weights: its sampler weights, or for a mid-run
    (state-only) checkpoint, a training client loaded from the state and snapshotted."""
    if record.get("sampler_path"):
        return backend.create_sampling_client(model_path=record["sampler_path"])
    trainer = backend.create_training_client_from_state(record["state_path"])
    return trainer.save_weights_and_get_sampling_client()


def stored_results(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / EVAL_STORE
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _key(checkpoint: str, name: str, settings: dict[str, Any]) -> str:
    return json.dumps([checkpoint, name, settings], sort_keys=True)


def benchmark_evaluators(
    names: Sequence[str], store: DatasetStore, settings: BenchmarkSettings
) -> dict[str, Any]:
    """A pass@k BenchmarkEvaluator per EVAL_TASKS name (an unknown name fails here, before any
    checkpoint is loaded)."""
    loaders = {name: EVAL_TASKS.get(name) for name in names}
    tasks: dict[str, BenchmarkTask] = {
        name: load(store, settings.source, settings.limit) for name, load in loaders.items()
    }
    return {
        name: BenchmarkEvaluator(
            problems=task.problems, grade=task.grade, prefix=name,
            num_samples=settings.num_samples, ks=settings.ks,
            max_tokens=settings.max_tokens, temperature=settings.temperature,
        )
        for name, task in tasks.items()
    }  # fmt: skip


def inspect_evaluators(names: Sequence[str], settings: BenchmarkSettings) -> dict[str, Any]:
    """An InspectEvaluator per INSPECT_TASKS name, sampled with the settings' temperature and
    max_tokens on the first `limit` samples."""
    from train_core.evaluation.inspect_evaluator import InspectEvaluator

    builders = {name: INSPECT_TASKS.get(name) for name in names}
    return {
        name: InspectEvaluator(tasks=partial(_one_task, build), limit=settings.limit,
                               temperature=settings.temperature, max_tokens=settings.max_tokens)
        for name, build in builders.items()
    }  # fmt: skip


def _one_task(build: Callable[[], Any]) -> list[Any]:
    return [build()]


def evaluate_checkpoints(
    run_dir: Path,
    evaluators: Mapping[str, Any],
    backend: TrainingBackend,
    renderer_for: Callable[[dict[str, Any], Any], Any],
    settings: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """Score each checkpoint of `run_dir` with each sampling Evaluator in `evaluators` (by the
    name its results are stored under); the new results are appended to the eval store and
    returned. `settings` (JSON values) is part of a result's identity; `renderer_for(record,
    tokenizer)` is the renderer a checkpoint record's model answers with."""
    wanted = json.loads(json.dumps(dict(settings)))  # tuples as the store holds them
    done = {_key(r["checkpoint"], r["benchmark"], r["settings"]) for r in stored_results(run_dir)}
    new: list[dict[str, Any]] = []
    for record in run_checkpoints(run_dir):
        todo = [n for n in evaluators if _key(record["name"], n, wanted) not in done]
        if not todo:
            continue
        client = sampling_client(backend, record)
        renderer = renderer_for(record, client.get_tokenizer())
        for name in todo:
            metrics = asyncio.run(evaluators[name](client, renderer=renderer))
            result = {"checkpoint": record["name"], "step": record.get("step"),
                      "path": record.get("sampler_path") or record["state_path"], "benchmark": name,
                      "settings": wanted, "metrics": metrics}  # fmt: skip
            with (run_dir / EVAL_STORE).open("a") as f:
                f.write(json.dumps(result) + "\n")
            new.append(result)
    return new
