"""Writing a run's files so that a kill or a full disk never leaves one torn, and a failed write
is one line naming the file. Shared by the run directory (kitchen.app.rundir) and the stages that
keep files of their own in it (a run's sections)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from kitchen.engine.errors import KitchenError


class RunDirError(KitchenError):
    """A file of the run directory cannot be written (disk full, permissions): the run stops."""


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """OSError while writing `path` -> one line naming the file and the reason."""
    try:
        yield
    except OSError as e:
        raise RunDirError(f"cannot write {path}: {e.strerror or e}") from e


def replace_text(path: Path, text: str) -> None:
    """Write `text` beside `path` and rename it into place: a kill or a full disk mid-write leaves
    the old file whole."""
    tmp = path.with_name(f".{path.name}.tmp")
    with writing(path):
        try:
            with tmp.open("w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
