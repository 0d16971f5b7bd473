"""What the server holds, as the SDK's RestClient lists and shows it: sessions, training runs and
every checkpoint (`get_session`, `list_sessions`, `get_training_run`, `list_training_runs`,
`list_user_checkpoints`).

Sessions and runs are this process's: the session table keeps a record of every model it created,
after its session ends too. Checkpoints are every folder under the checkpoint root, so a server
restarted on the same folder lists what an earlier one saved, and a run known only from its
checkpoints is shown from the newest one's metadata. Lists come newest first, paged by
limit/offset with the SDK's `Cursor`. Everything here belongs to the server's one user and it keeps
no projects, so `access_scope` and `project_id` change nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

from fastapi import FastAPI, Query
from fastapi.responses import Response
from tinker import types

from kitchen.serve import paths
from kitchen.serve.checkpoint_routes import saved_checkpoints
from kitchen.serve.errors import NotFound
from kitchen.serve.hot_routes import json_response

T = TypeVar("T")
OWNER = "local"  # the one user of a kitchen serve process
Limit = Annotated[int, Query(ge=0)]
Offset = Annotated[int, Query(ge=0)]


def page(items: Sequence[T], limit: int, offset: int) -> tuple[list[T], types.Cursor]:
    cursor = types.Cursor(offset=offset, limit=limit, total_count=len(items))
    return list(items[offset : offset + limit]), cursor


def session_info(service: Any, session_id: str) -> types.GetSessionResponse:
    session = service.sessions.known_session(session_id)
    return types.GetSessionResponse(
        training_run_ids=sorted(session.models),
        sampler_ids=sorted(session.samplers),
        user_metadata=session.user_metadata,
        display_name=session.display_name,
    )


def training_runs(service: Any) -> list[types.TrainingRun]:
    """This process's runs, then runs an earlier server left checkpoints of; newest first."""
    records = service.sessions.runs()
    by_run: dict[str, list[types.Checkpoint]] = {}
    for c in saved_checkpoints(service.checkpoint_root, [r.model_id for r in records]):
        by_run.setdefault(paths.parse_tinker_path(c.tinker_path).run_id, []).append(c)
    runs = [
        _run(
            r.model_id,
            r.base_model,
            r.lora_rank,
            r.last_request,
            by_run.pop(r.model_id, []),
            r.user_metadata,
        )
        for r in records
    ]
    for run_id, checkpoints in by_run.items():
        found = _run_from_checkpoints(service, run_id, checkpoints)
        if found is not None:
            runs.append(found)
    return sorted(runs, key=lambda r: r.last_request_time, reverse=True)


def _run(
    run_id: str,
    base_model: str,
    lora_rank: int | None,
    last_request: float,
    checkpoints: list[types.Checkpoint],  # oldest first
    user_metadata: dict[str, str] | None = None,
) -> types.TrainingRun:
    def newest(kind: str) -> types.Checkpoint | None:
        return next((c for c in reversed(checkpoints) if c.checkpoint_type == kind), None)

    return types.TrainingRun(
        training_run_id=run_id,
        base_model=base_model,
        model_owner=OWNER,
        is_lora=lora_rank is not None,
        lora_rank=lora_rank,
        last_request_time=datetime.fromtimestamp(last_request, UTC),
        last_checkpoint=newest("training"),
        last_sampler_checkpoint=newest("sampler"),
        user_metadata=user_metadata,
    )


def _run_from_checkpoints(
    service: Any, run_id: str, checkpoints: list[types.Checkpoint]
) -> types.TrainingRun | None:
    """A run of an earlier server, from its newest readable checkpoint; None if none reads."""
    from kitchen.adapters.local.clients.checkpoints import read_meta
    from kitchen.engine.errors import BackendError

    for c in reversed(checkpoints):
        try:
            meta = read_meta(paths.parse_tinker_path(c.tinker_path).folder(service.checkpoint_root))
        except BackendError:  # an encrypted export, or a folder that is not a checkpoint
            continue
        rank = meta.lora.get("rank") if meta.lora is not None else None
        return _run(run_id, meta.base_model, rank, c.time.timestamp(), checkpoints)
    return None


def add_listing_routes(app: FastAPI, service: Any) -> None:
    """The routes; each reads the disk in a worker thread, off the event loop."""

    @app.get("/api/v1/sessions")
    async def list_sessions(limit: Limit = 20, offset: Offset = 0) -> Response:
        ids = [s.session_id for s in reversed(service.sessions.all_sessions())]
        return json_response(types.ListSessionsResponse(sessions=page(ids, limit, offset)[0]))

    @app.get("/api/v1/sessions/{session_id}")
    async def get_session(session_id: str) -> Response:
        return json_response(session_info(service, session_id))

    @app.get("/api/v1/training_runs")
    async def list_runs(limit: Limit = 20, offset: Offset = 0) -> Response:
        runs, cursor = page(await asyncio.to_thread(training_runs, service), limit, offset)
        return json_response(types.TrainingRunsResponse(training_runs=runs, cursor=cursor))

    @app.get("/api/v1/training_runs/{run_id}")
    async def get_run(run_id: str) -> Response:
        for run in await asyncio.to_thread(training_runs, service):
            if run.training_run_id == run_id:
                return json_response(run)
        raise NotFound(
            f"training run {run_id!r} is unknown to this server (no model, no checkpoint)"
        )

    @app.get("/api/v1/checkpoints")
    async def user_checkpoints(limit: Limit = 100, offset: Offset = 0) -> Response:
        run_ids = [r.model_id for r in service.sessions.runs()]
        found = await asyncio.to_thread(saved_checkpoints, service.checkpoint_root, run_ids)
        checkpoints, cursor = page(found[::-1], limit, offset)
        return json_response(types.CheckpointsListResponse(checkpoints=checkpoints, cursor=cursor))
