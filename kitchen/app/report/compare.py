"""Tables across runs: the config fields that differ, and the final evaluation."""

from __future__ import annotations

import json
from typing import Any

from kitchen.app.report.rundata import RunData, number

EVAL_PREFIXES = ("test/", "eval/", "final/")


def flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def config_rows(runs: list[RunData]) -> tuple[list[tuple[str, list[str]]], int]:
    """(field, value per run) for the fields that differ (all fields for a single run), and how
    many fields are the same in every run."""
    flat = [{"recipe": r.recipe, **flatten(r.config)} for r in runs]
    keys = sorted({k for f in flat for k in f})
    rows, same = [], 0
    for key in keys:
        values = [show(f[key]) if key in f else "—" for f in flat]
        if len(runs) > 1 and len(set(values)) == 1:
            same += 1
            continue
        rows.append((key, values))
    return rows, same


def final_eval(runs: list[RunData]) -> list[tuple[str, list[str]]]:
    """Each evaluation key (test/..., eval/...) and its last value in each run."""
    last: list[dict[str, float]] = []
    for run in runs:
        values: dict[str, float] = {}
        for record in run.metrics.records:
            for key, value in record.items():
                v = number(value)
                if key.startswith(EVAL_PREFIXES) and v is not None:
                    values[key] = v
        last.append(values)
    keys = sorted({k for values in last for k in values})
    return [(k, [f"{values[k]:.4g}" if k in values else "—" for values in last]) for k in keys]
