"""The RestClient's checkpoint routes (list, delete), and a final answer for every route this server
does not serve.

Checkpoints are the folders `paths.py` maps tinker paths to, so listing a run is a directory scan
and deleting one removes its folder. Any other path gets a 404 with a one-line reason and
`x-should-retry: false`, which the SDK's HTTP layer and its retry handler both treat as final.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from tinker import types

from kitchen.serve import paths
from kitchen.serve.errors import NotFound
from kitchen.serve.hot_routes import json_response

_TYPES = {"state": "training", "sampler": "sampler"}


def list_checkpoints(root: Path, run_id: str) -> types.CheckpointsListResponse:
    """Every checkpoint `run_id` saved, oldest first."""
    prefix = f"{paths.run_slug(run_id)}--"
    found = []
    for kind, subdir in (("state", "weights"), ("sampler", "sampler_weights")):
        folder = root / subdir
        for path in folder.glob(f"{prefix}*") if folder.is_dir() else []:
            ref = paths.checkpoint_ref(run_id, kind, path.name[len(prefix) :])
            found.append(
                types.Checkpoint(
                    checkpoint_id=f"{subdir}/{ref.name}",
                    checkpoint_type=_TYPES[kind],  # type: ignore[arg-type]
                    time=datetime.fromtimestamp(path.stat().st_mtime, UTC),
                    tinker_path=ref.tinker_path,
                    size_bytes=sum(f.stat().st_size for f in path.rglob("*") if f.is_file()),
                )
            )
    return types.CheckpointsListResponse(checkpoints=sorted(found, key=lambda c: c.time))


def delete_checkpoint(root: Path, run_id: str, checkpoint_id: str) -> None:
    ref = paths.parse_tinker_path(f"{paths.SCHEME}{run_id}/{checkpoint_id}")
    folder = ref.folder(root)
    if not folder.is_dir():
        raise NotFound(f"checkpoint {ref.tinker_path} does not exist on this server")
    shutil.rmtree(folder)


def register(app: FastAPI, service: Any) -> None:
    """Add the checkpoint routes, then the catch-all (so it must be registered last)."""

    @app.get("/api/v1/training_runs/{run_id}/checkpoints")
    async def checkpoints(run_id: str) -> Response:
        return json_response(list_checkpoints(service.checkpoint_root, run_id))

    @app.delete("/api/v1/training_runs/{run_id}/checkpoints/{checkpoint_id:path}")
    async def delete(run_id: str, checkpoint_id: str) -> Response:
        delete_checkpoint(service.checkpoint_root, run_id, checkpoint_id)
        return json_response({})

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def unserved(request: Request, path: str) -> Response:
        detail = f"{request.method} /{path} is not served by kitchen serve (local engine)"
        return json_response({"detail": detail, "category": "user"}, 404)
