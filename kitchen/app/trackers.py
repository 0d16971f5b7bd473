"""Experiment trackers beside W&B: Trackio (local-first: a SQLite file under $TRACKIO_DIR, its
dashboard runs locally) and Neptune (neptune-scale; `NEPTUNE_MODE=offline` keeps the run in a local file for a later
`neptune-sync`). Each is an optional package, imported only when its project is set. They
log the keys metrics.jsonl has, at the same steps; text values (metrics.jsonl's "nan") are left out."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from kitchen.app.report.compare import flatten
from kitchen.app.sinks import RunSink
from kitchen.engine.errors import ConfigError
from kitchen.ports import MetricsSink


def numeric(metrics: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for key, value in metrics.items():
        if hasattr(value, "item"):
            value = value.item()
        if isinstance(value, bool | int | float) and math.isfinite(value):
            out[key] = float(value)
    return out


def _need(package: str, extra: str) -> None:
    raise ConfigError(
        f"tracking to {extra} needs the {package} package: pip install 'kitchen[{extra}]'"
    )


def trackio_sink(project: str, name: str | None, config: dict[str, Any]) -> RunSink:
    try:
        import trackio
    except ModuleNotFoundError:
        _need("trackio", "trackio")
    return RunSink(trackio.init, project, name, config, keep=numeric)


class NeptuneSink:
    """neptune-scale, as tinker-cookbook: metrics by their metrics.jsonl keys, the config
    flattened. NEPTUNE_MODE=offline keeps the run in a local file (`log_directory`) for a later
    `neptune-sync`; the API token comes from NEPTUNE_API_TOKEN."""

    def __init__(self, project: str, name: str | None, config: dict[str, Any]) -> None:
        try:
            from neptune_scale import Run
        except ModuleNotFoundError:
            _need("neptune-scale", "neptune")
        self._run = Run(project=project, experiment_name=name, enable_console_log_capture=False)
        # Neptune keeps scalars and strings; lists, None and nested models become their JSON.
        self._run.log_configs(
            {
                key: value if isinstance(value, bool | int | float | str) else json.dumps(value)
                for key, value in flatten(config).items()
            }
        )

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        self._run.log_metrics(numeric(metrics), step=step)

    def close(self) -> None:
        self._run.close()


def open_trackers(config: Mapping[str, Any]) -> list[MetricsSink]:
    """The tracker sinks a run's config asks for (`trackio_project`, `neptune_project`; the run
    name is `wandb_name`), each with the config recorded."""
    name = config.get("wandb_name")
    sinks: list[MetricsSink] = []
    if config.get("trackio_project"):
        sinks.append(trackio_sink(config["trackio_project"], name, dict(config)))
    if config.get("neptune_project"):
        sinks.append(NeptuneSink(config["neptune_project"], name, dict(config)))
    return sinks
