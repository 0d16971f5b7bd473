"""The run directory: config.json (secrets redacted), plan.txt, metrics.jsonl, checkpoints.jsonl,
logs.log. Files are appended and flushed per step, so a killed run loses nothing it reported."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any, Literal

from kitchen.engine.errors import ConfigError
from kitchen.engine.secrets import REDACTED, ScrubSecrets, redact, secret_values

IfExists = Literal["delete", "resume", "raise"]


def prepare(log_dir: Path, if_exists: IfExists) -> bool:
    """Create the run directory; return True when resuming into an existing one."""
    exists = log_dir.exists() and any(log_dir.iterdir())
    if exists and if_exists == "raise":
        raise ConfigError(
            f"log dir {log_dir} already exists; pass --if-exists resume to continue it or --if-exists delete to start over"
        )
    if exists and if_exists == "delete":
        shutil.rmtree(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    return exists and if_exists == "resume"


def write_config(
    log_dir: Path, recipe: str, config: dict[str, Any], dtype: str | None = None
) -> None:
    """config.json: the recipe, its config (secrets redacted) and, when the backend says, the
    dtype it actually trains in (what `auto` resolved to on this machine)."""
    payload: dict[str, Any] = {"recipe": recipe, "config": redact(config)}
    if dtype is not None:
        payload["dtype"] = dtype
    text = json.dumps(payload, indent=2, default=str)
    for secret in secret_values():  # a key pasted into some other field is still a key
        text = text.replace(secret, REDACTED)
    (log_dir / "config.json").write_text(text + "\n")


def write_plan(log_dir: Path, plan: str) -> None:
    (log_dir / "plan.txt").write_text(plan + "\n")


def attach_log_file(log_dir: Path) -> logging.Handler:
    handler = logging.FileHandler(log_dir / "logs.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(ScrubSecrets())
    logger = logging.getLogger("kitchen")
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    return handler


def detach_log_file(handler: logging.Handler) -> None:
    logging.getLogger("kitchen").removeHandler(handler)
    handler.close()


def truncate_metrics(path: Path, resume_step: int) -> int:
    """Drop rows of steps a resumed run will redo, so metrics.jsonl holds each step once."""
    if not path.exists():
        return 0
    kept, dropped = [], 0
    for line in path.read_text().splitlines():
        try:
            step = json.loads(line).get("step", 0)
        except json.JSONDecodeError:
            dropped += 1  # a line cut short by a kill
            continue
        if step >= resume_step:
            dropped += 1
        else:
            kept.append(line)
    path.write_text("".join(k + "\n" for k in kept))
    return dropped
