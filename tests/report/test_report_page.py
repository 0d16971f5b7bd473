import re

import pytest
from typer.testing import CliRunner

import kitchen
from kitchen.app.cli import app
from kitchen.app.report import load_run, render
from kitchen.app.report.transcripts import rollout_views
from tests.helpers import report_peak_memory, step_records


def families(page: str) -> list[str]:
    return re.findall(r'class="chart" id="chart-\d+" data-family="([^"]+)"', page)


def test_report_command_overlays_runs_with_their_config_diff(runs, tmp_path):
    out = tmp_path / "cmp.html"
    result = CliRunner().invoke(
        app, ["report", str(runs["sl"]), str(runs["sl_fast"]), "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert families(page) == [
        "Loss / NLL",
        "Learning rate",
        "Grad norm",  # the fake's unclipped_grad_l2:mean
        "Step time",
        "Throughput",
        "Tokens and data",
        "Progress",
    ]
    assert '"name": "sl_fast \\u00b7 train_mean_nll"' in page  # both runs in one chart
    assert "1 fields differ" in page
    diff = re.search(r'<section id="config">.*?</section>', page, re.S).group(0)
    assert "<td>optimizer.learning_rate</td><td>0.0002</td><td>0.0003</td>" in diff
    assert "<td>batch_size</td>" not in diff  # equal in both runs: not repeated
    assert "<td>test/nll</td>" in page  # the final evaluation table
    assert "Tell me the capital of Jamaica." in page  # SFT before/after samples
    assert "workflow supervised" in page  # the plan


def test_page_needs_no_network(runs):
    page = render([load_run(runs["rl"])])
    assert not re.search(r"<script[^>]+src=|<link\b|<img\b|<iframe\b", page)
    assert "Plotly.newPlot" in page and len(page) > 3_000_000  # plotly.js itself is inlined


def test_default_output_is_report_html_in_the_run_dir(runs):
    result = CliRunner().invoke(app, ["report", str(runs["rl"])])
    assert result.exit_code == 0, result.output
    assert (runs["rl"] / "report.html").is_file()


def test_rl_rollouts_are_browsable_and_shaded_by_advantage(runs):
    page = render([load_run(runs["rl"])])
    assert {"Reward", "KL", "Entropy", "Step time"} <= set(families(page))
    for iteration in range(3):
        assert f"iteration {iteration}: mean reward 0.500, 8 groups" in page
    # each sampled token its own span (escaped), shaded by the advantage the writer recorded
    up = '<span class="tok" style="background: rgba(46,160,67,0.53)" title="advantage +0.500">'
    down = '<span class="tok" style="background: rgba(214,39,40,0.53)" title="advantage -0.500">'
    assert f"{up}1</span>{up}6</span>{up}&lt;|im_end|&gt;</span>" in page  # "16<|im_end|>"
    assert down in page
    assert "trajectory 0: reward 1.000, advantage +0.500" in page


def test_recorded_advantages_shade_each_turns_tokens():
    turns = [
        {"prompt": "Q", "response": "ab", "tokens": ["a", "b"], "advantage": 0.2},
        {"prompt": "Qab T", "response": "c", "tokens": ["c"], "advantage": -0.8},
    ]
    record = {"group": 0, "trajectories": [{"reward": 5.0, "turns": turns}]}
    (view,) = rollout_views({0: [record]})
    (traj,) = view.groups[0].trajectories
    assert [t.advantage for t in traj.turns] == [0.2, -0.8]  # recorded, not reward - mean
    assert traj.advantage == pytest.approx(-0.3)
    assert traj.turns[0].tokens == ["a", "b"]
    assert traj.turns[0].shade.startswith("rgba(46,160,67") and traj.turns[1].shade.startswith(
        "rgba(214,39,40,0.53"
    )  # the largest |advantage| of the iteration is the full shade


def test_token_pieces_that_do_not_rebuild_the_response_are_not_shown():
    turn = {"prompt": "Q", "response": "abc", "tokens": ["a", "X"], "advantage": 1.0}
    (view,) = rollout_views({0: [{"group": 0, "trajectories": [{"reward": 1, "turns": [turn]}]}]})
    assert view.groups[0].trajectories[0].turns[0].tokens == []


def test_advantage_is_reward_minus_group_mean():
    def traj(reward):
        return {"reward": reward, "turns": [{"prompt": "p", "response": "r", "reward": reward}]}

    record = {
        "group": 0,
        "tags": [],
        "policy_version": 0,
        "trajectories": [traj(1.0), traj(0.0), traj(0.0), traj(0.0)],
    }
    (view,) = rollout_views({0: [record]})
    advantages = [t.advantage for t in view.groups[0].trajectories]
    assert advantages == [0.75, -0.25, -0.25, -0.25]
    shades = [t.shade for t in view.groups[0].trajectories]
    assert shades[0].startswith("rgba(46,160,67") and shades[1].startswith("rgba(214,39,40")


def test_multi_turn_shows_only_what_each_turn_added():
    turns = [
        {"prompt": "Guess.", "response": " 8", "reward": 0.0},
        {"prompt": "Guess. 8 Higher.", "response": " 12", "reward": 1.0},
    ]
    record = {"group": 0, "trajectories": [{"reward": 1.0, "turns": turns}]}
    (view,) = rollout_views({0: [record]})
    assert [t.observation for t in view.groups[0].trajectories[0].turns] == ["Guess.", " Higher."]


def test_dpo_pairs_are_shown_only_when_the_run_dir_has_them(runs, tmp_path):
    import json
    import shutil

    run_dir = tmp_path / "dpo_like"
    shutil.copytree(runs["sl"], run_dir)
    assert "preference pairs" not in render([load_run(run_dir)])
    pair = {
        "prompt": "Hi",
        "chosen": "Hello!",
        "rejected": "Go away.",
        "chosen_reward": 0.3,
        "rejected_reward": -0.2,
    }
    (run_dir / "pairs.jsonl").write_text(
        "".join(json.dumps({**pair, "step": step, "pair": 0}) + "\n" for step in (0, 1))
    )
    page = render([load_run(run_dir)])
    assert "preference pairs" in page
    assert (
        '<pre>Go away.</pre></td><td class="num">+0.3000</td><td class="num">-0.2000</td>' in page
    )
    assert "step 0: 1 pairs" in page and "step 1: 1 pairs" in page  # browsable by step


def test_a_prompt_shared_by_the_group_is_shown_once():
    def traj(response):
        return {"reward": 0.0, "turns": [{"prompt": "What is 2 + 2?", "response": response}]}

    record = {"group": 0, "trajectories": [traj("4"), traj("5")]}
    (view,) = rollout_views({0: [record]})
    group = view.groups[0]
    assert group.prompt == "What is 2 + 2?"
    assert [t.turns[0].observation for t in group.trajectories] == ["", ""]


def test_step_time_throughput_and_memory_are_curves(tmp_path, monkeypatch):
    report_peak_memory(monkeypatch, gib=2.5)
    kitchen.run("sl_basic", {"no_register": True}, backend="fake", log_dir=tmp_path, max_steps=3)
    assert [r["memory/peak_gib"] for r in step_records(tmp_path)] == [2.5] * 3
    page = render([load_run(tmp_path)])
    assert {"Step time", "Throughput", "Memory"} <= set(families(page))
    for key in ("time/total", "time/forward_backward", "time/optim_step", "tokens_per_second"):
        assert f'"name": "{key}"' in page
