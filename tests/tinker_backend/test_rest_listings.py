"""The RestClient's listings through the official SDK against `kitchen serve`: sessions, training
runs and checkpoints come from what the server holds, and publishing is answered "not served"."""

from __future__ import annotations

from pathlib import Path

import pytest
import tinker

from kitchen.adapters.local.clients.checkpoints import CheckpointMeta
from kitchen.serve.listings import training_runs
from kitchen.serve.sessions import SessionTable

from .conftest import TINY


def test_sessions_runs_and_checkpoints_reflect_the_server(sdk_env: str) -> None:
    service = tinker.ServiceClient(user_metadata={"team": "pastry"}, display_name="two runs")
    rest = tinker.RestClient()
    session_id = service.holder.get_session_id()
    small = service.create_lora_training_client(
        TINY, rank=4, user_metadata={"kind": "small"}
    ).result()
    large = service.create_lora_training_client(TINY, rank=8).result()
    saved = small.save_state("first").result().path
    sampler = small.save_weights_for_sampler("first").result().path

    session = rest.get_session(session_id).result()
    assert set(session.training_run_ids) == {small.model_id, large.model_id}
    assert session.user_metadata == {"team": "pastry"} and session.display_name == "two runs"
    assert rest.list_sessions(limit=5).result().sessions[0] == session_id  # newest first

    listed = rest.list_training_runs(limit=100).result()
    runs = {r.training_run_id: r for r in listed.training_runs}
    assert listed.cursor.total_count == len(runs) >= 2
    first, second = runs[small.model_id], runs[large.model_id]
    assert (first.base_model, first.is_lora, first.lora_rank) == (TINY, True, 4)
    assert first.user_metadata == {"kind": "small"}
    assert first.last_checkpoint is not None and first.last_checkpoint.tinker_path == saved
    assert first.last_sampler_checkpoint is not None
    assert first.last_sampler_checkpoint.tinker_path == sampler
    assert second.lora_rank == 8 and second.last_checkpoint is None
    assert rest.get_training_run(small.model_id).result() == first
    assert rest.get_training_run_by_tinker_path(saved).result().training_run_id == small.model_id
    one = rest.list_training_runs(limit=1, offset=1).result()
    assert len(one.training_runs) == 1 and (one.cursor.offset, one.cursor.limit) == (1, 1)
    assert one.training_runs[0] == listed.training_runs[1]

    checkpoints = rest.list_user_checkpoints(limit=100).result()
    paths = [c.tinker_path for c in checkpoints.checkpoints]
    assert {saved, sampler} <= set(paths)
    assert checkpoints.cursor is not None and checkpoints.cursor.total_count == len(paths)
    times = [c.time for c in checkpoints.checkpoints]
    assert times == sorted(times, reverse=True)

    with pytest.raises(tinker.NotFoundError, match="not served"):
        rest.unpublish_checkpoint_from_tinker_path(saved).result()
    with pytest.raises(tinker.NotFoundError, match="not served"):
        rest.publish_checkpoint_from_tinker_path(saved).result()
    assert saved in [
        c.tinker_path for c in rest.list_checkpoints(small.model_id).result().checkpoints
    ]
    with pytest.raises(tinker.NotFoundError, match="unknown to this server"):
        rest.get_training_run("kitchen-none:train:0").result()

    service.close("success").result()
    rest = tinker.RestClient()
    after = rest.get_session(session_id).result()  # a finished session is still shown
    assert set(after.training_run_ids) == {small.model_id, large.model_id}
    assert rest.get_training_run(large.model_id).result().lora_rank == 8


def test_runs_an_earlier_server_saved_are_listed_from_their_checkpoints(tmp_path: Path) -> None:
    folder = tmp_path / "weights" / "kitchen-old.train.0--step2"
    folder.mkdir(parents=True)
    CheckpointMeta("state", TINY, "/models/tiny", {"rank": 16}, seed=0, step=2).write(folder)

    class Service:
        sessions = SessionTable()
        checkpoint_root = tmp_path

    (run,) = training_runs(Service())
    assert run.training_run_id == "kitchen-old.train.0"
    assert (run.base_model, run.lora_rank) == (TINY, 16)
    assert run.last_checkpoint is not None
    assert run.last_checkpoint.tinker_path == "tinker://kitchen-old.train.0/weights/step2"
