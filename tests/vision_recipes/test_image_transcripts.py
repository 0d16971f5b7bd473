"""Pictures in transcripts: saved once beside the records and named by path (no base64 in the
JSONL), shown by `kitchen report` as thumbnails inlined in the page."""

from __future__ import annotations

import json
from pathlib import Path

from cookbook.recipes.vlm_classifier import VLMClassifier
from cookbook.recipes.vlm_rl import VLMRL
from kitchen.adapters.fake import FakeBackend
from kitchen.app.launch import run
from kitchen.app.report.page import write_report
from kitchen.workflows.common.images import IMAGE_MARKER

THUMB = '<img class="thumb" src="data:image/png;base64,'


def test_rollout_pictures_are_files_the_report_shows(tmp_path: Path) -> None:
    cfg = {"no_register": True, "groups_per_batch": 2, "group_size": 2, "num_test_problems": 0}
    run(VLMRL(), cfg, backend=FakeBackend(), log_dir=tmp_path, max_steps=2)
    lines = (tmp_path / "rollouts" / "iter_000000.jsonl").read_text()
    assert "base64" not in lines and len(lines) < 20_000
    turn = json.loads(lines.splitlines()[0])["trajectories"][0]["turns"][0]
    assert turn["prompt"].count(IMAGE_MARKER) == 1 and len(turn["images"]) == 1
    assert (tmp_path / turn["images"][0]).is_file()
    # 2 steps x 2 groups, each group one picture: at most 4 files, each saved once
    assert 1 <= len(list((tmp_path / "images").iterdir())) <= 4
    page = write_report([tmp_path]).read_text()
    assert page.count(THUMB) == 4  # one per group: its shared prompt's picture


def test_sample_pictures_are_shown_beside_their_prompt(tmp_path: Path) -> None:
    cfg = {"no_register": True, "batch_size": 8, "eval_every": 0, "num_samples_to_show": 2}
    run(VLMClassifier(), cfg, backend=FakeBackend(), log_dir=tmp_path, max_steps=1)
    samples = [json.loads(x) for x in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert [len(s["images"]) for s in samples] == [1, 1]
    page = write_report([tmp_path]).read_text()
    assert page.count(THUMB) == 2


def test_a_missing_picture_leaves_the_transcript_readable(tmp_path: Path) -> None:
    cfg = {"no_register": True, "batch_size": 8, "eval_every": 0, "num_samples_to_show": 1}
    run(VLMClassifier(), cfg, backend=FakeBackend(), log_dir=tmp_path, max_steps=1)
    for picture in (tmp_path / "images").iterdir():
        picture.unlink()
    page = write_report([tmp_path]).read_text()
    assert THUMB not in page and "What is the name of the subject in this photo?" in page
