"""Disk full on a real filesystem, run inside a private mount namespace (`unshare -rm`):

    unshare -rm python -m tests.resume.small_fs_child MOUNT_DIR SIZE STRAIGHT_RUN RECIPE OVERRIDES STEPS

mounts a SIZE tmpfs on MOUNT_DIR, runs RECIPE there until the disk is full, checks that what was
written is whole, grows the filesystem (space freed), resumes, and compares with STRAIGHT_RUN.
Prints one JSON line: the error the run stopped with, and what went wrong after (or null).
"""

from __future__ import annotations

import json
import subprocess
import sys
import traceback
from pathlib import Path


def main(mount: str, size: str, straight: str, recipe: str, overrides: str, steps: str) -> None:
    from kitchen.adapters.local.clients import checkpoints as folders
    from kitchen.app.launch import run
    from kitchen.engine.errors import KitchenError
    from tests.resume.cases import assert_same_run

    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", mount], check=True)
    log_dir = Path(mount) / "run"
    config, max_steps = json.loads(overrides), int(steps)
    out: dict[str, object] = {"error": None, "problem": None}
    try:
        run(recipe, config, backend="local", log_dir=log_dir, max_steps=max_steps)
    except KitchenError as e:
        out["error"] = str(e)
    try:
        for line in (log_dir / "checkpoints.jsonl").read_text().splitlines():
            folders.read_meta(Path(json.loads(line)["state_path"]))
        leftovers = list((log_dir / "checkpoints").rglob(".*.tmp-*"))
        assert not leftovers, f"half-written folders left: {leftovers}"
        subprocess.run(["mount", "-o", "remount,size=512m", mount], check=True)
        run(
            recipe,
            config,
            backend="local",
            log_dir=log_dir,
            max_steps=max_steps,
            if_exists="resume",
        )
        assert_same_run(Path(straight), log_dir)
    except Exception:
        out["problem"] = traceback.format_exc()[-2000:]
    print(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:])
