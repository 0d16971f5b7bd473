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
