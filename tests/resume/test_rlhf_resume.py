"""The RLHF pipeline in the resume-equivalence matrix: a run of three sections (SFT, preference
model, RL) SIGKILLed inside a section and between sections, resumed each time, ends with every
section's per-step metrics and final weights equal to a run never killed, each step logged once,
and the run's own metrics.jsonl (the sections' summaries) whole. KITCHEN_LONG=1 adds kill points
in every section and between each two."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from kitchen.app.launch import run
from tests.resume.cases import TINY, assert_same_run, metrics_by_step
from tests.resume.test_chaos import _child
from train_core.checkpoint import load_checkpoint_records

pytestmark = pytest.mark.slow
SECTIONS = ("sft", "preference_model", "rl")
RL_STEPS = 3

# Two SFT steps, two preference-model steps, three RL steps; a checkpoint every two steps. One
# RL group per step: concurrent sample requests share the engine's decode batch (docs/resume.md).
CONFIG: dict[str, Any] = {
    "model_name": TINY,
    "no_register": True,
    "save_every": 2,
    "max_length": 256,
    "max_comparisons": 8,
    "sft_batch_size": 4,
    "pm_batch_size": 4,
    "num_test_comparisons": 2,
    "pm_eval_every": 1,
    "group_size": 2,
    "groups_per_batch": 1,
    "num_batches": RL_STEPS,
    "max_tokens": 6,
    "rl_eval_every": 2,
    "num_eval_prompts": 1,
    "tournament": "all_pairs_one_way",
}


def _killed(log_dir: Path, kind: str, n: int) -> None:
    """Run the pipeline into `log_dir` (resuming what is there) in a child that SIGKILLs itself
    at the n-th `kind` (tests/resume/chaos_child.py); it must really die."""
    code = _child(log_dir, "rlhf_pair_pref", CONFIG, kind, n, max_steps=1000)
    assert code == -signal.SIGKILL, f"{kind} {n}: not killed ({code})"


def _finished(log_dir: Path) -> list[str]:
    """The sections whose checkpoints.jsonl holds a final record."""
    return [s for s in SECTIONS if (log_dir / s).exists()
            and any(r.final for r in load_checkpoint_records(log_dir / s))]  # fmt: skip


def _chain(tmp_path: Path, kills: list[tuple[str, int, list[str]]]) -> None:
    """Kill a run at each (kind, n) in turn, checking which sections had finished by then;
    resume to the end in this process; compare with a run never killed."""
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    run("rlhf_pair_pref", CONFIG, backend="local", log_dir=straight)
    for kind, n, finished in kills:
        _killed(killed, kind, n)
        assert _finished(killed) == finished, (kind, n)
    run("rlhf_pair_pref", CONFIG, backend="local", log_dir=killed, if_exists="resume")
    for section in SECTIONS:
        assert_same_run(straight / section, killed / section)
    assert sorted(metrics_by_step(killed / "rl")) == list(range(RL_STEPS + 1))  # + final eval
    assert metrics_by_step(straight) == metrics_by_step(killed)  # the sections' summaries


def test_killed_between_sections_and_inside_rl(tmp_path: Path) -> None:
    # 1st child: killed as the RL section starts (SFT and preference model done); 2nd: at the
    # end of RL step index 1, after its step-2 checkpoint, before that step's metrics.
    _chain(tmp_path, [("run", 4, ["sft", "preference_model"]),
                      ("step", 1, ["sft", "preference_model"])])  # fmt: skip


@pytest.mark.skipif(os.environ.get("KITCHEN_LONG") != "1", reason="long chaos run: KITCHEN_LONG=1")
def test_killed_in_every_section_and_between_each_two(tmp_path: Path) -> None:
    _chain(tmp_path, [
        ("step", 0, []),                                 # SFT step index 0
        ("run", 3, ["sft"]),                             # between SFT and preference model
        ("record", 1, ["sft"]),                          # preference model, checkpoint unrecorded
        ("torn", 1, ["sft"]),                            # preference model, half a record
        ("run", 3, ["sft", "preference_model"]),         # between preference model and RL
        ("write", 1, ["sft", "preference_model"]),       # RL, during a checkpoint write
        ("step", 2, ["sft", "preference_model"]),        # RL's last step
    ])  # fmt: skip
