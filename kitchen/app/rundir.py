"""The run directory: config.json (secrets redacted), plan.txt, metrics.jsonl, checkpoints.jsonl,
logs.log. Files are appended and flushed per step, so a killed run loses nothing it reported."""

from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from kitchen.engine.errors import ConfigError
from kitchen.engine.files import replace_text
from kitchen.engine.secrets import REDACTED, ScrubSecrets, redact, secret_values

if TYPE_CHECKING:
    from train_core.checkpoint import CheckpointRecord

log = logging.getLogger("kitchen")

IfExists = Literal["ask", "delete", "resume", "raise"]
CHOICES = {"d": "delete", "delete": "delete", "r": "resume", "resume": "resume", "q": "raise",
           "quit": "raise", "exit": "raise"}  # fmt: skip


class LogDirExists(ConfigError):
    """The run directory holds an earlier run and nothing said what to do with it. The message
    names the Python argument; the CLI says the same in flags."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        super().__init__(
            f'log dir {log_dir} already exists; pass if_exists="resume" to continue it or '
            f'if_exists="delete" to start over, or another log_dir'
        )


def on_terminal() -> bool:
    """A person can answer a question: stdin and stderr (where it is asked) are a terminal."""
    return sys.stdin.isatty() and sys.stderr.isatty()


def ask_if_exists(log_dir: Path) -> IfExists:
    """tinker-cookbook's behavior_if_exists="ask": delete, resume or quit (then the run stops as
    with "raise"). Off a terminal nobody can answer, so it is "raise"."""
    if not on_terminal():
        return "raise"
    while True:
        print(
            f"log dir {log_dir} already exists: [d]elete it and start over, [r]esume it, "
            "or [q]uit? ",
            end="",
            file=sys.stderr,
            flush=True,
        )
        answer = sys.stdin.readline()
        if not answer:  # end of input: nobody is there to answer
            return "raise"
        choice = CHOICES.get(answer.strip().lower())
        if choice is not None:
            return choice  # type: ignore[return-value]


def prepare(log_dir: Path, if_exists: IfExists) -> bool:
    """Create the run directory; return True when resuming into an existing one."""
    if if_exists not in ("ask", "delete", "resume", "raise"):
        raise ConfigError(f"if_exists: expected ask, delete, resume or raise (got {if_exists!r})")
    exists = log_dir.exists() and any(log_dir.iterdir())
    if exists and if_exists == "ask":
        if_exists = ask_if_exists(log_dir)
    if exists and if_exists == "raise":
        raise LogDirExists(log_dir)
    if exists and if_exists == "delete":
        shutil.rmtree(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    return exists and if_exists == "resume"


def discard(log_dir: Path, created: bool) -> None:
    """Remove what a run that failed before its first step wrote, so the corrected command does
    not meet its directory: the directory itself when the run created it, else its contents."""
    if created:
        shutil.rmtree(log_dir, ignore_errors=True)
        return
    for child in log_dir.iterdir():
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


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
    replace_text(log_dir / "config.json", text + "\n")


def write_plan(log_dir: Path, plan: str) -> None:
    replace_text(log_dir / "plan.txt", plan + "\n")


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


def _last_logged_step(path: Path) -> int | None:
    last = None
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                step = int(json.loads(line).get("step", 0))
            except (ValueError, AttributeError, TypeError):
                continue  # a line cut short by a kill
            last = step if last is None else max(last, step)
    return last


def resume_record(log_dir: Path) -> CheckpointRecord | None:
    """The checkpoint record to resume from: the last one with a state_path whose previous step
    is no later than the last step in metrics.jsonl. A step is recorded (its checkpoint) before its
    metrics are logged, so a run killed (or out of disk) in between resumes one checkpoint earlier
    and logs that step again instead of never. A run that logged no step metrics at all resumes
    from its last record."""
    from train_core.checkpoint import live_checkpoint_records

    resumable = [r for r in live_checkpoint_records(log_dir) if r.state_path]  # none retired
    last = _last_logged_step(log_dir / "metrics.jsonl")
    usable = [r for r in resumable if last is None or int(r.get("step", 0) or 0) - 1 <= last]
    if usable[-1:] != resumable[-1:]:
        log.warning(
            "%s: checkpoint %s is past the last step in metrics.jsonl; resuming from the one before",
            log_dir,
            resumable[-1].name,
        )
    return usable[-1] if usable else None


def truncate_metrics(path: Path, resume_step: int) -> int:
    """Drop rows of steps a resumed run will redo, so metrics.jsonl holds each step once. The
    file is replaced whole, so a kill during the rewrite loses none of the rows kept."""
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
    if dropped:
        replace_text(path, "".join(k + "\n" for k in kept))
    return dropped
