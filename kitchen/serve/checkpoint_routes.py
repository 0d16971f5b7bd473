"""The RestClient's checkpoint routes (list, delete, TTL, external weights URLs), the signed
downloads of external weights (`external_weights.py`), and a final answer for every route this
server does not serve (publishing among them: checkpoints here are not public or private).

Checkpoints are the folders `paths.py` maps tinker paths to, so listing a run is a directory scan
and deleting one removes its folder. Any other path gets a 404 with a one-line reason and
`x-should-retry: false`, which the SDK's HTTP layer and its retry handler both treat as final.
"""

from __future__ import annotations

import contextlib
import hmac
import shutil
import time
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, Response
from tinker import types

from kitchen.serve import external_weights, paths
from kitchen.serve.errors import NotFound, UserError
from kitchen.serve.hot_routes import json_response

_TYPES = {"state": "training", "sampler": "sampler", "external": "external"}
_NOT_PUBLISHED = (
    "publishing checkpoints is not served by kitchen serve: its checkpoints are folders on the "
    "server's disk, readable by every client of the server; nothing is public or private"
)


def list_checkpoints(root: Path, run_id: str) -> types.CheckpointsListResponse:
    """Every checkpoint `run_id` saved, oldest first."""
    prefix = f"{paths.run_slug(run_id)}--"
    found = []
    for kind, subdir in paths.SUBDIRS.items():
        folder = root / subdir
        for path in folder.glob(f"{prefix}*") if folder.is_dir() else []:
            found.append(
                _checkpoint(paths.checkpoint_ref(run_id, kind, path.name[len(prefix) :]), path)
            )
    return types.CheckpointsListResponse(checkpoints=sorted(found, key=lambda c: c.time))


def saved_checkpoints(root: Path, run_ids: Iterable[str]) -> list[types.Checkpoint]:
    """Every checkpoint folder under `root`, oldest first. A folder of one of `run_ids` is named by
    that run; any other (an earlier server's, on the same folder) by its folder's run part, a run
    id that maps back to the same folder."""
    by_slug = {paths.run_slug(r): r for r in run_ids}
    found = []
    for kind, subdir in paths.SUBDIRS.items():
        folder = root / subdir
        for path in folder.iterdir() if folder.is_dir() else []:
            slug, sep, name = path.name.partition("--")
            if sep and path.is_dir():
                with contextlib.suppress(paths.CheckpointPathError):  # not a folder serve wrote
                    found.append(
                        _checkpoint(paths.checkpoint_ref(by_slug.get(slug, slug), kind, name), path)
                    )
    return sorted(found, key=lambda c: c.time)


def _checkpoint(ref: paths.CheckpointRef, folder: Path) -> types.Checkpoint:
    return types.Checkpoint(
        checkpoint_id=f"{paths.SUBDIRS[ref.kind]}/{ref.name}",
        checkpoint_type=_TYPES[ref.kind],  # type: ignore[arg-type]
        time=datetime.fromtimestamp(folder.stat().st_mtime, UTC),
        tinker_path=ref.tinker_path,
        size_bytes=sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()),
    )


def existing_folder(root: Path, run_id: str, checkpoint_id: str, kind: str | None = None) -> Path:
    """The folder of a saved checkpoint (of `kind`, when given); 404 if there is none."""
    ref = paths.parse_tinker_path(f"{paths.SCHEME}{run_id}/{checkpoint_id}")
    if kind is not None and ref.kind != kind:
        raise UserError(f"{ref.tinker_path} is not a checkpoint of kind {kind}")
    folder = ref.folder(root)
    if not folder.is_dir():
        raise NotFound(f"checkpoint {ref.tinker_path} does not exist on this server")
    return folder


def add_checkpoint_routes(app: FastAPI, service: Any) -> None:
    """Add the checkpoint routes, then the catch-all (so it must be added last)."""

    @app.get("/api/v1/training_runs/{run_id}/checkpoints")
    async def checkpoints(run_id: str) -> Response:
        return json_response(list_checkpoints(service.checkpoint_root, run_id))

    @app.post("/api/v1/training_runs/{run_id}/checkpoints/{checkpoint_id:path}/publish")
    async def publish(run_id: str, checkpoint_id: str) -> Response:
        raise NotFound(_NOT_PUBLISHED)

    @app.delete("/api/v1/training_runs/{run_id}/checkpoints/{checkpoint_id:path}")
    async def delete(run_id: str, checkpoint_id: str) -> Response:
        if checkpoint_id.partition("/")[2].endswith("/publish"):  # unpublish: <kind>/<name>/publish
            raise NotFound(_NOT_PUBLISHED)
        shutil.rmtree(existing_folder(service.checkpoint_root, run_id, checkpoint_id))
        return json_response({})

    @app.put("/api/v1/training_runs/{run_id}/checkpoints/{checkpoint_id:path}/ttl")
    async def ttl(run_id: str, checkpoint_id: str) -> Response:
        existing_folder(service.checkpoint_root, run_id, checkpoint_id)  # TTLs are not enforced
        return json_response({})

    _external_weights_routes(app, service)

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def unserved(request: Request, path: str) -> Response:
        detail = f"{request.method} /{path} is not served by kitchen serve (local engine)"
        return json_response({"detail": detail, "category": "user"}, 404)


def _external_weights_routes(app: FastAPI, service: Any) -> None:
    # The server's API key when it has one (stable across restarts), else a per-process secret.
    secret = (service.settings.api_key or "").encode() or uuid.uuid4().bytes
    route = "/api/v1/training_runs/{run_id}/checkpoints/{checkpoint_id:path}/external_weights_urls"

    @app.get(route)
    async def urls(request: Request, run_id: str, checkpoint_id: str) -> Response:
        folder = existing_folder(service.checkpoint_root, run_id, checkpoint_id, "external")
        base = str(request.base_url)
        return json_response(external_weights.signed_urls(secret, base, folder, time.time()))

    @app.get(external_weights.DOWNLOAD_PREFIX + "{export}/{relative:path}")
    async def download(request: Request, export: str, relative: str) -> Response:
        expires_text = request.query_params.get("expires", "")
        expires = int(expires_text) if expires_text.isdigit() else 0  # 0: refused as expired
        given = request.query_params.get("signature", "")
        expected = external_weights.signature(secret, request.url.path, expires)
        if not hmac.compare_digest(given, expected) or expires < time.time():
            return json_response({"detail": "download URL invalid or expired"}, 403)
        root = (service.checkpoint_root / paths.SUBDIRS["external"] / export).resolve()
        file = (root / relative).resolve()
        if not file.is_relative_to(root) or not file.is_file():
            raise NotFound(f"{export}/{relative} is not part of an export on this server")
        return FileResponse(file)
