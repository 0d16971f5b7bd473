"""`tinker://` checkpoint paths <-> the local engine's checkpoint folders.

The SDK only accepts `tinker://<run>/<weights|sampler_weights>/<name>` (it refuses to sample from
anything else), so the server hands those out. The mapping is a pure function of the path, so a
server restarted on the same checkpoint folder still resolves every path it ever returned:

    tinker://<model_id>/weights/<name>  ->  <root>/weights/<slug(model_id)>--<name>

A plain folder path (one a `kitchen run --backend local` wrote) loads only when it lies inside the
checkpoint root or a folder the operator allow-listed (`--allow-checkpoint-dir`): a client never
names an arbitrary place on the server's disk.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kitchen.serve.errors import UserError

SCHEME = "tinker://"
SUBDIRS = {"state": "weights", "sampler": "sampler_weights", "external": "external_weights"}
_KIND = {v: k for k, v in SUBDIRS.items()}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_RUN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")


class CheckpointPathError(UserError):
    """A checkpoint path the server cannot resolve (a user error)."""


@dataclass(frozen=True)
class CheckpointRef:
    """One checkpoint: the training run (model id) that wrote it, its kind and its name."""

    run_id: str
    kind: str  # "state" | "sampler" | "external"
    name: str

    @property
    def tinker_path(self) -> str:
        return f"{SCHEME}{self.run_id}/{SUBDIRS[self.kind]}/{self.name}"

    @property
    def engine_name(self) -> str:
        """The name the local engine saves under: unique per run, one path part."""
        return f"{run_slug(self.run_id)}--{self.name}"

    def folder(self, checkpoint_root: Path) -> Path:
        return checkpoint_root / SUBDIRS[self.kind] / self.engine_name


def run_slug(run_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", ".", run_id)


def checkpoint_ref(run_id: str, kind: str, name: str) -> CheckpointRef:
    if not _NAME.match(name):
        raise CheckpointPathError(
            f"checkpoint name {name!r}: expected letters, digits, '.', '_' or '-' (one path part)"
        )
    return CheckpointRef(run_id, kind, name)


def parse_tinker_path(path: str) -> CheckpointRef:
    """`tinker://<run>/<weights|sampler_weights|external_weights>/<name>` -> CheckpointRef; a clear error otherwise."""
    if not path.startswith(SCHEME):
        raise CheckpointPathError(
            f"checkpoint path {path!r}: expected tinker://<run>/weights/<name>"
        )
    parts = path[len(SCHEME) :].split("/")
    if len(parts) != 3 or parts[1] not in _KIND or not _RUN.match(parts[0]):
        raise CheckpointPathError(
            f"checkpoint path {path!r}: expected tinker://<run>/<kind>/<name>, <kind> one of "
            "weights, sampler_weights, external_weights"
        )
    return checkpoint_ref(parts[0], _KIND[parts[1]], parts[2])


def resolve_checkpoint(
    path: str, checkpoint_root: Path, allowed: Sequence[Path] = ()
) -> tuple[str, str]:
    """(engine folder, path to report) for a load: tinker paths map to the server's folders; a
    plain folder is used as is when it resolves (links followed) inside `checkpoint_root` or one
    of the `allowed` folders."""
    if path.startswith(SCHEME):
        ref = parse_tinker_path(path)
        folder = ref.folder(checkpoint_root)
        if not folder.is_dir():
            raise CheckpointPathError(f"checkpoint {path} does not exist on this server")
        return str(folder), path
    if "://" in path and not path.startswith("local://"):
        raise CheckpointPathError(
            f"checkpoint path {path!r}: expected tinker://<run>/weights/<name> or a folder path"
        )
    folder = Path(path.removeprefix("local://")).expanduser()
    if not folder.is_absolute():
        raise CheckpointPathError(f"checkpoint path {path!r}: a folder path must be absolute")
    real = folder.resolve()
    roots = [Path(r).resolve() for r in (checkpoint_root, *allowed)]
    if not any(real.is_relative_to(r) for r in roots):
        raise CheckpointPathError(
            f"checkpoint {path} is outside this server's checkpoint folders; the operator can "
            "allow a folder with `kitchen serve --allow-checkpoint-dir DIR`"
        )
    return str(real), path
