"""rlhf_pair_pref end to end on the fake backend: the plan shows three sections, each section runs
in its own folder, and the RL section trains the SFT weights against the preference model's final
sampler (read from checkpoints.jsonl), with the SFT policy's sampler as the win-rate reference."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from typer.testing import CliRunner

from kitchen.adapters.fake.backend import FakeBackend, FakeSamplingClient
from kitchen.app.cli import app
from kitchen.app.launch import run
from kitchen.app.resolve import get_recipe, resolve_config

FAST = {"num_batches": 2, "rl_eval_every": 1, "num_eval_prompts": 3, "pm_eval_every": 0,
        "group_size": 3, "groups_per_batch": 2, "no_register": True,
        "max_comparisons": 16, "tournament": "all_pairs_one_way"}  # fmt: skip


@dataclass
class RecordingBackend(FakeBackend):
    """Remembers the path of every sampler opened and of every training client's start."""

    sampler_paths: list[str] = field(default_factory=list)
    started_from: list[str | None] = field(default_factory=list)
    judged_by: list[str] = field(default_factory=list)

    def create_sampling_client(self, model_path=None, base_model=None):
        client = super().create_sampling_client(model_path, base_model)
        self.sampler_paths.append(model_path)
        client.path = model_path  # type: ignore[attr-defined]
        return client

    def create_lora_training_client(self, base_model, *args, **kwargs):
        self.started_from.append(None)
        return super().create_lora_training_client(base_model, *args, **kwargs)


@pytest.fixture
def judged(monkeypatch):
    """Which sampler's compute_logprobs ran (a judge call), by its path."""
    seen: list[str] = []
    original = FakeSamplingClient.compute_logprobs

    def compute_logprobs(self, prompt):
        seen.append(getattr(self, "path", "snapshot"))
        return original(self, prompt)

    monkeypatch.setattr(FakeSamplingClient, "compute_logprobs", compute_logprobs)
    return seen


def test_dry_run_shows_the_three_sections():
    result = CliRunner().invoke(app, ["run", "rlhf_pair_pref", "--dry-run"], terminal_width=250)
    assert result.exit_code == 0, result.output
    for section in ("section_sft", "section_preference_model", "section_rl"):
        assert section in result.output
    assert "evaluate_judge_accuracy" in result.output and "evaluate_win_rate" in result.output
    assert "load_checkpoint_path='<sft final state>'" in result.output
    assert "learning_rate=0.0003, loss_fn='importance_sampling'" in result.output  # --learning-rate


def test_rl_trains_the_sft_weights_against_the_preference_models_sampler(tmp_path, judged):
    backend = RecordingBackend()
    result = run("rlhf_pair_pref", FAST, backend=backend, log_dir=tmp_path)
    paths = result.state.section_paths
    assert paths["sft"]["state_path"] == "fake://state/sft_final"
    assert paths["preference_model"]["sampler_path"] == "fake://sampler/preference_model_final"
    # the RL policy's weights: restored from the SFT state (load_state on a fresh client)
    assert "load_state" in backend.calls
    # judge and reference: frozen samplers on the earlier sections' final sampler paths
    assert backend.sampler_paths == [
        "fake://sampler/preference_model_final",
        "fake://sampler/sft_final",
    ]
    # the preference model's own held-out accuracy (24 test pairs, 2 answers) judges with a
    # snapshot of its training weights; every RL-time judgement with the final preference model
    assert judged.count("snapshot") == 24 * 2 * 2  # both slot orders
    judged = [path for path in judged if path != "snapshot"]
    assert set(judged) == {"fake://sampler/preference_model_final"}
    # rewards are judged per group: all_pairs_one_way of 3 = 3 matchups, 2 answers (A, B) each
    rollout_judgements = 2 * 2 * 3 * 2  # steps x groups x matchups x answers
    win_rate_judgements = 3 * 3 * 2 * 2  # evaluations x prompts x both ways x answers
    assert len(judged) == rollout_judgements + win_rate_judgements
    assert backend.unawaited == 0
    for section in ("sft", "preference_model", "rl"):
        records = [
            json.loads(x)
            for x in (tmp_path / section / "checkpoints.jsonl").read_text().splitlines()
        ]
        assert records[-1]["final"] is True and records[-1]["name"] == "final"
    rl = [json.loads(x) for x in (tmp_path / "rl" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rl if "test/win_rate" in r] == [0, 1, 2]
    assert "rl/test/win_rate" in result.state.eval_results or any(
        "rl/test/win_rate" in m for m in result.metrics
    )


def test_a_later_run_skips_finished_sections_and_reads_their_paths(tmp_path, judged):
    first = RecordingBackend()
    run(
        "rlhf_pair_pref",
        {**FAST, "sections": ["sft", "preference_model"]},
        backend=first,
        log_dir=tmp_path,
    )
    assert not (tmp_path / "rl").exists()
    second = RecordingBackend(states=first.states)  # the same service, a new connection
    result = run("rlhf_pair_pref", FAST, backend=second, log_dir=tmp_path, if_exists="resume")
    assert len(second.started_from) == 1  # only the RL policy's client
    assert "fake://sampler/preference_model_final" in second.sampler_paths
    assert result.state.section_paths["rl"]["state_path"] == "fake://state/rl_final"


def test_rl_alone_without_earlier_sections_is_a_clear_error(tmp_path):
    with pytest.raises(Exception, match="needs sft, preference_model"):
        run("rlhf_pair_pref", {**FAST, "sections": ["rl"]}, backend="fake", log_dir=tmp_path)


def test_cookbook_preset_holds_the_rlhf_pipelines_values():
    cfg = resolve_config(get_recipe("rlhf_pair_pref"), preset="cookbook").config
    assert (cfg.model_name, cfg.dataset, cfg.lora_rank, cfg.group_size) == (
        "Qwen/Qwen3.5-9B-Base",
        "hhh",
        64,
        4,
    )
    assert (cfg.sft_learning_rate, cfg.pm_learning_rate, cfg.optimizer.learning_rate) == (
        2e-4,
        3e-4,
        1e-5,
    )
    assert cfg.tournament == "all_pairs_both_ways" and cfg.max_tokens == 1024


class HHStore:
    """A dataset store serving hh-rlhf-shaped transcripts (the hub is offline in tests)."""

    def __init__(self) -> None:
        self.loads: list[tuple[str, str]] = []

    def load(self, name, split="train"):
        self.loads.append((name, split))
        return [
            {"chosen": f"\n\nHuman: question {i}?\n\nAssistant: A kind answer {i}.",
             "rejected": f"\n\nHuman: question {i}?\n\nAssistant: Go away."}
            for i in range(12)
        ]  # fmt: skip


@pytest.mark.parametrize(
    "dataset,train_split,test_split",
    [("hhh", "train", "test"), ("helpsteer3", "train", "validation"),
     ("ultrafeedback", "train[1024:]", "train[:1024]")],
)  # fmt: skip
def test_hub_comparison_sets_feed_every_section_with_their_own_held_out_split(
    dataset, train_split, test_split
):
    args = ["run", "rlhf_pair_pref", "--dry-run", f"dataset={dataset}"]
    out = CliRunner().invoke(app, args, terminal_width=400).output
    assert out.count(f"into='conversations', split='{train_split}'") == 2  # SFT and judge
    assert f"into='test_conversations', split='{test_split}'" in out


def test_hh_rlhf_rows_run_through_the_three_sections(tmp_path):
    store = HHStore()
    config = {**FAST, "dataset": "hhh", "groups_per_batch": 1}
    result = run("rlhf_pair_pref", config, backend="fake", log_dir=tmp_path, datasets=store)
    assert set(result.state.section_paths) == {"sft", "preference_model", "rl"}
    assert ("Anthropic/hh-rlhf", "test") in store.loads  # judge accuracy and win-rate prompts


def _steps(folder) -> list[int]:
    return [json.loads(x)["step"] for x in (folder / "metrics.jsonl").read_text().splitlines()]


def test_max_steps_stops_every_section(tmp_path):
    """--max-steps is the run's: each section stops after that many of its own steps, saves its
    final checkpoint and hands it on."""
    run("rlhf_pair_pref", {**FAST, "num_batches": 4}, backend="fake", log_dir=tmp_path,
        max_steps=2)  # fmt: skip
    for section in ("sft", "preference_model", "rl"):
        steps = _steps(tmp_path / section)
        assert max(steps) <= 2 and {0, 1} <= set(steps), (section, steps)
        records = [json.loads(x) for x in (tmp_path / section / "checkpoints.jsonl").open()]
        assert records[-1]["final"] and records[-1]["step"] == 2, (section, records[-1])


def test_a_resumed_section_logs_each_step_once(tmp_path):
    """A section cut short after its step-2 checkpoint resumes there; its metrics.jsonl holds
    each step once, as a resumed run's does."""
    config = {**FAST, "num_batches": 4, "save_every": 2}
    straight = run("rlhf_pair_pref", config, backend="fake", log_dir=tmp_path / "a")
    backend = FakeBackend()
    run("rlhf_pair_pref", {**config, "sections": ["sft", "preference_model"]}, backend=backend,
        log_dir=tmp_path / "b")  # fmt: skip
    run("rlhf_pair_pref", config, backend=backend, log_dir=tmp_path / "b", if_exists="resume",
        max_steps=3)  # fmt: skip
    rl = tmp_path / "b" / "rl"
    lines = (rl / "checkpoints.jsonl").read_text().splitlines()
    (rl / "checkpoints.jsonl").write_text(lines[0] + "\n")  # as if killed after step index 2
    assert [r["step"] for r in map(json.loads, lines[:1])] == [2]
    resumed = run("rlhf_pair_pref", config, backend=backend, log_dir=tmp_path / "b",
                  if_exists="resume")  # fmt: skip
    assert resumed.state.section_paths["rl"]["state_path"] == "fake://state/rl_final"
    assert _steps(rl) == _steps(tmp_path / "a" / "rl")
    assert straight.state.section_paths == resumed.state.section_paths
