import json
import shutil

import pytest

from kitchen.app.report import load_run, render
from kitchen.engine.errors import ConfigError


def test_a_run_still_writing_skips_the_partial_last_line(runs, tmp_path):
    live = tmp_path / "live"
    shutil.copytree(runs["sl"], live)
    (live / "checkpoints.jsonl").unlink()  # no final checkpoint yet
    with (live / "metrics.jsonl").open("a") as f:
        f.write('{"step": 7, "train_mean_n')  # the writer is mid-line
    run = load_run(live)
    assert run.metrics.last_line_partial and run.metrics.bad_lines == 1
    assert not run.finished
    assert run.status() == "running or stopped early; last step 6; last metrics line incomplete"
    assert [p[0] for p in run.series()["train_mean_nll"]] == [0, 1, 2, 3, 4, 5]
    assert "last metrics line incomplete" in render([run])


def test_a_killed_run_with_only_metrics_still_renders(tmp_path):
    killed = tmp_path / "killed"
    killed.mkdir()
    rows = [{"step": s, "train_mean_nll": 2.0 - s / 10, "time/total": "nan"} for s in range(3)]
    (killed / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    page = render([load_run(killed)])
    assert "Loss / NLL" in page and "No checkpoints recorded." in page
    assert "No plan.txt." in page and "No transcripts in these run directories" in page


def test_a_folder_that_is_no_run_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_run(tmp_path / "missing")
    with pytest.raises(ConfigError, match="is not a run directory"):
        load_run(tmp_path)


def test_checkpoints_are_those_still_there_and_retirements_are_counted(tmp_path):
    run_dir = tmp_path / "rolling"
    run_dir.mkdir()
    w = "run/checkpoints/weights"
    lines = [
        {"name": "000001", "step": 1, "state_path": f"{w}/000001", "rolling": True},
        {"name": "000002", "step": 2, "state_path": f"{w}/000002", "rolling": True},
        {"name": "000001", "retired_state_path": f"{w}/000001"},
        {"name": "000003", "step": 3, "state_path": f"{w}/000003", "rolling": True},
        {"name": "000002", "retired_state_path": f"{w}/000002"},
        {"name": "000003", "retired_state_path": f"{w}/000003"},
        {"name": "final", "step": 3, "final": True, "state_path": f"{w}/final",
         "sampler_path": "run/checkpoints/sampler_weights/final"},
    ]  # fmt: skip
    text = "".join(json.dumps(x) + "\n" for x in lines) + '{"name": "0000'  # a torn last line
    (run_dir / "checkpoints.jsonl").write_text(text)
    run = load_run(run_dir)
    assert [c["name"] for c in run.checkpoints] == ["final"] and run.finished
    assert run.retired_checkpoints == 3
    page = render([run])
    section = page[page.index('<section id="checkpoints">') :]
    section = section[: section.index("</section>")]
    assert "3 retired rolling checkpoints (deleted) not listed." in section
    assert "000001" not in section and f"{w}/final" in section
