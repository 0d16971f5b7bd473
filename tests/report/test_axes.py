"""Keys of one chart whose scales differ go on separate y axes (issue 38: DPO's accuracy, 0 to 1,
was a flat line beside margins of ±15); keys of alike scale share one."""

from __future__ import annotations

import json
from pathlib import Path

from kitchen.app.report.charts import figures, split_axes
from kitchen.app.report.rundata import load_run


def dpo_like_run(folder: Path, margin: float) -> Path:
    folder.mkdir()
    rows = [
        {"step": s, "accuracy": min(1.0, 0.5 + s / 10), "test/pairwise_accuracy": 0.4 + s / 20,
         "margin": margin * s / 5, "chosen_reward": margin * s / 10, "rejected_reward": -margin * s / 10,
         "dpo_loss": 0.69 - s / 20, "test/nll": 2.1 - s / 4}
        for s in range(6)
    ]  # fmt: skip
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def chart(charts: list[dict], family: str) -> dict:
    return next(c for c in charts if c["family"] == family)


def test_fractions_beside_margins_get_the_right_axis(tmp_path: Path) -> None:
    charts = figures([load_run(dpo_like_run(tmp_path / "dpo", margin=15.0))])
    accuracy = chart(charts, "Accuracy and margin")
    assert accuracy["axes"] == {
        "y": ["chosen_reward", "margin", "rejected_reward"],
        "y2": ["accuracy", "test/pairwise_accuracy"],
    }
    on_right = {t["name"] for t in accuracy["data"] if t["yaxis"] == "y2"}
    assert on_right == {"accuracy (right axis)", "test/pairwise_accuracy (right axis)"}
    assert accuracy["layout"]["yaxis2"]["overlaying"] == "y"
    # a loss of 0.69 beside an NLL of 2.1: alike enough for one axis
    loss = chart(charts, "Loss / NLL")
    assert (
        loss["axes"] == {"y": ["dpo_loss", "test/nll"], "y2": []} and "yaxis2" not in loss["layout"]
    )


def test_a_comparison_splits_by_the_scales_of_every_run(tmp_path: Path) -> None:
    runs = [load_run(dpo_like_run(tmp_path / n, margin=m)) for n, m in (("a", 0.5), ("b", 15.0))]
    accuracy = chart(figures(runs), "Accuracy and margin")
    assert accuracy["axes"]["y2"] == ["accuracy", "test/pairwise_accuracy"]
    names = {t["name"] for t in accuracy["data"] if t["yaxis"] == "y2"}
    assert names == {f"{r} · {k} (right axis)" for r in "ab" for k in accuracy["axes"]["y2"]}


def test_the_split_falls_in_the_widest_gap_between_sizes() -> None:
    assert split_axes({"a": 1.0, "b": 3.0}) == (["a", "b"], [])
    assert split_axes({"a": 1.0, "b": 1.5, "c": 40.0, "d": 60.0}) == (["c", "d"], ["a", "b"])
    assert split_axes({"only": 5.0, "zero": 0.0}) == (["only", "zero"], [])
