"""A run that SIGKILLs itself at one chosen point, for the chaos tests:

    python -m tests.resume.chaos_child LOG_DIR RECIPE OVERRIDES_JSON MAX_STEPS KIND N

runs RECIPE into LOG_DIR (resuming what is there) and kills this process, at the N-th time of
KIND in this process:
- write:  during a checkpoint folder write (its files written, the folder not yet in place);
- record: after a checkpoint folder is in place, before its checkpoints.jsonl record;
- torn:   half-way through writing a checkpoints.jsonl record;
- step:   at the end of step index N (its metrics not yet logged);
- run:    at the start of the N-th workflow run (a run of sections starts one per section);
- none:   never (the run finishes).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

KINDS = ("write", "record", "torn", "step")  # "run" matters only for a run of sections


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _nth(n: int) -> Callable[[], bool]:
    calls = [0]

    def due() -> bool:
        calls[0] += 1
        return calls[0] == n

    return due


def arm(kind: str, n: int) -> list[Any]:
    """Patch the write layer to die at the n-th `kind`; the hooks to run with (for `step`)."""
    import train_core.checkpoint as records
    from kitchen.adapters.local.clients import checkpoints as folders
    from kitchen.engine.runner import BaseHook

    due = _nth(n)
    if kind == "write":
        real_write = folders.write_folder

        def write_folder(dest: Path, fill: Callable[[Path], None]) -> Path:
            def fill_then_die(tmp: Path) -> None:
                fill(tmp)
                if due():
                    _die()

            return real_write(dest, fill_then_die)

        folders.write_folder = write_folder  # type: ignore[assignment]
    elif kind in ("record", "torn"):
        real_append = records.append_checkpoint_record

        def append(log_dir: Any, record: Any) -> None:
            if due():
                if kind == "torn":
                    line = json.dumps(record.to_dict()) + "\n"
                    with open(records.checkpoints_file(log_dir), "a") as f:
                        f.write(line[: len(line) // 2])
                _die()
            real_append(log_dir, record)

        records.append_checkpoint_record = append  # type: ignore[assignment]
    elif kind == "step":

        class DieAtStep(BaseHook):
            def on_step_end(self, step: int, metrics: object) -> None:
                if step == n:
                    _die()

        return [DieAtStep()]
    elif kind == "run":

        class DieAtRun(BaseHook):
            def on_run_start(self, workflow: object, state: object) -> None:
                if due():
                    _die()

        return [DieAtRun()]
    return []


def main(argv: list[str]) -> None:
    log_dir, recipe, overrides, max_steps, kind, n = argv
    hooks = arm(kind, int(n))
    from kitchen.app.launch import run

    run(
        recipe,
        json.loads(overrides),
        backend="local",
        log_dir=log_dir,
        max_steps=int(max_steps),
        if_exists="resume",
        hooks=hooks,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
