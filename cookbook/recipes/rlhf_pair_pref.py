"""rlhf_pair_pref: RLHF with a learned pairwise preference model, as tinker-cookbook's
recipes/preference/rlhf pipeline, in three sections of one run (each in `<log_dir>/<section>`):

1. sft: fine-tune the policy on the preferred completion of each comparison;
2. preference_model: fine-tune a judge (from the base model) to answer "A" or "B" on comparisons
   rendered as one conversation; metric test/pairwise_accuracy on held-out comparisons;
3. rl: RL of the SFT policy, each group's answers judged pairwise by the preference model
   (its final sampler, read from preference_model/checkpoints.jsonl); metric test/win_rate of the
   policy against the SFT policy's greedy answers on held-out prompts.

A finished section is skipped on a re-run into the same log dir; an unfinished one resumes.
Locally: SmolLM2-135M-Instruct on the bundled prefs. `--preset cookbook`: Qwen3.5-9B-Base on hhh.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import replace
from typing import Any, ClassVar, Literal

from pydantic import Field

from cookbook.datasets.comparison import chosen_and_rejected, swapped
from cookbook.envs.pairwise import PreferenceRLDatasets
from cookbook.recipes import SMOLLM2
from cookbook.recipes.dataset_splits import DatasetSplits, resolve_dataset
from kitchen.engine.graph import Node, Workflow
from kitchen.engine.recipe import Recipe
from kitchen.workflows.common.config import TrainConfig
from kitchen.workflows.common.parts import WorkflowParts
from kitchen.workflows.common.register import RegisterModel
from kitchen.workflows.common.setup import LoadDataset, RowConverter
from kitchen.workflows.reinforcement import RLConfig
from kitchen.workflows.reinforcement.state import RLState
from kitchen.workflows.rlhf import RLHFState, RunSection, SectionPaths, preference_rl, sectioned
from kitchen.workflows.supervised import SupervisedConfig
from kitchen.workflows.supervised.state import SupervisedState
from kitchen.workflows.supervised.workflow import supervised_parts
from train_core.preference.judge_accuracy import JudgeAccuracyEvaluator, labeled_comparison
from train_core.preference.preference_model import GenerativePreferenceModel, judge_example
from train_core.preference.tournament import TournamentPattern

SectionName = Literal["sft", "preference_model", "rl"]
SECTIONS: tuple[SectionName, ...] = ("sft", "preference_model", "rl")


class RLHFPairPrefConfig(TrainConfig):
    # --learning-rate and --lr-schedule are the RL section's (the run's product is the RL policy)
    defaults: ClassVar[dict[str, Any]] = {
        "model_name": SMOLLM2,
        "learning_rate": 3e-4,
        "lr_schedule": "constant",
    }
    dataset: str = Field(
        "bundled:prefs",
        description="Comparisons for all three sections: hhh | helpsteer3 | ultrafeedback | "
        "bundled:NAME | path.jsonl | a hub name",
    )
    sections: list[SectionName] = Field(
        list(SECTIONS), description="Which sections to run (a later one reads an earlier one's "
        "final checkpoint from this log dir)"
    )  # fmt: skip
    max_length: int = Field(1024, gt=0, description="Longest SFT / judge example in tokens")
    max_comparisons: int | None = Field(
        96, ge=1, description="Comparisons the SFT and preference-model sections train on (None: all)"
    )  # fmt: skip
    num_test_comparisons: int | None = Field(
        24, ge=1, description="Held-out comparisons the preference model is scored on (None: all)"
    )  # fmt: skip
    section_learning_rates: ClassVar[tuple[str, ...]] = ("sft_learning_rate", "pm_learning_rate")
    sft_learning_rate: float = Field(
        3e-4, gt=0, description="SFT Adam learning rate; auto (or learning_rate=auto): the "
        "model's recommended one (get_lr)"
    )  # fmt: skip
    sft_batch_size: int = Field(8, gt=0, description="SFT conversations per step")
    sft_num_epochs: int = Field(1, gt=0, description="SFT passes over the preferred completions")
    pm_learning_rate: float = Field(
        1e-3, gt=0, description="Preference model learning rate; auto (or learning_rate=auto): "
        "the model's recommended one (get_lr)"
    )  # fmt: skip
    pm_batch_size: int = Field(8, gt=0, description="Preference model comparisons per step")
    pm_num_epochs: int = Field(1, gt=0, description="Preference model passes over the comparisons")
    pm_eval_every: int = Field(12, ge=0, description="Held-out pairwise accuracy every N steps")
    group_size: int = Field(4, ge=2, description="Answers per prompt, judged against each other")
    groups_per_batch: int = Field(2, ge=1, description="Prompts per RL step")
    num_batches: int | None = Field(4, ge=1, description="RL steps (None: every batch of prompts)")
    max_tokens: int = Field(48, ge=1, description="Max tokens of a policy answer")
    temperature: float = Field(1.0, gt=0, description="Sampling temperature of RL rollouts")
    tournament: TournamentPattern = Field(
        "all_pairs_both_ways", description="Pairs judged per group: all_pairs_one_way | "
        "all_pairs_both_ways (each pair in both slot orders, cancelling position bias)"
    )  # fmt: skip
    matchup_group_size: int = Field(4, ge=2, description="Tournaments run within chunks this big")
    judge_decisions: bool = Field(
        True, description="RL rewards from the judge's decisions (A or B, as tinker-cookbook's "
        "greedy judge) instead of its probabilities (an unsure judge gives tiny rewards)"
    )  # fmt: skip
    rl_eval_every: int = Field(2, ge=0, description="Win rate against the SFT policy every N steps")
    num_eval_prompts: int = Field(8, ge=1, description="Held-out prompts of the win rate")


def _common(cfg: RLHFPairPrefConfig) -> dict[str, Any]:
    return {"model_name": cfg.model_name, "backend": cfg.backend, "seed": cfg.seed,
            "lora_rank": cfg.lora_rank, "renderer_name": cfg.renderer_name,
            "save_every": cfg.checkpoint.save_every}  # fmt: skip


def chosen_conversation(convert: RowConverter) -> RowConverter:
    """A comparison row -> the conversation ending in its preferred completion (ties dropped)."""

    def convert_row(row: dict[str, Any], where: str) -> dict[str, Any] | None:
        comparison = convert(row, where)
        parts = chosen_and_rejected(comparison) if comparison else None
        return None if parts is None else {"messages": [*parts[0], *parts[1]]}

    return convert_row


def judge_row(convert: RowConverter) -> RowConverter:
    """A comparison row -> the judge's conversation, the row's fields riding along. Half of the
    rows (by a hash of their content) are swapped, so the judge sees "A" and "B" equally often."""

    def convert_row(row: dict[str, Any], where: str) -> dict[str, Any] | None:
        comparison = convert(row, where)
        if comparison is None or comparison["label"] == "Tie":
            return None
        if zlib.crc32(json.dumps(comparison, sort_keys=True).encode()) % 2:
            comparison = swapped(comparison)
        return {**comparison, "messages": judge_example(labeled_comparison(comparison))}

    return convert_row


def limited(
    parts: WorkflowParts,
    data: DatasetSplits,
    max_rows: int | None,
    max_test_rows: int | None = None,
) -> list[Node]:
    """The supervised nodes, reading at most `max_rows` rows of the dataset's training split (a
    hub set held out from its own train split, as UltraFeedback, trains on the rest) and
    `max_test_rows` held-out rows."""
    loads: dict[str, dict[str, Any]] = {"conversations": {"limit": max_rows, "split": data.split},
             "test_conversations": {"limit": max_test_rows}}  # fmt: skip
    data_nodes = [
        replace(n, **loads[n.into]) if isinstance(n, LoadDataset) else n for n in parts.data
    ]
    return parts._replace(data=data_nodes).nodes()


def recording(workflow: Workflow[RLState], cfg: RLHFPairPrefConfig) -> Workflow[RLState]:
    """The rl section registering the run's config (config.json's), not the section's share of it:
    the registered model is the product of all three sections."""
    config = json.loads(cfg.model_dump_json())
    nodes = [
        replace(n, config=config) if isinstance(n, RegisterModel) else n for n in workflow.nodes
    ]
    return replace(workflow, nodes=nodes)


def sft_section(cfg: RLHFPairPrefConfig, data: DatasetSplits) -> RunSection:
    sft = SupervisedConfig.from_layers(_common(cfg), {
        "dataset": data.source, "test_dataset": None, "batch_size": cfg.sft_batch_size,
        "num_epochs": cfg.sft_num_epochs, "learning_rate": cfg.sft_learning_rate,
        "max_length": cfg.max_length, "train_on_what": "last_assistant_message",
        "num_samples_to_show": 0, "register_model": False})  # fmt: skip

    def build(paths: SectionPaths, backend: Any) -> Workflow[SupervisedState]:
        parts = supervised_parts(sft, chosen_conversation(data.convert), "rlhf_sft")
        return Workflow("sft", SupervisedState, nodes=limited(parts, data, cfg.max_comparisons))

    return RunSection(section="sft", build=build)


def preference_model_section(cfg: RLHFPairPrefConfig, data: DatasetSplits) -> RunSection:
    """The judge starts from the base model, as tinker-cookbook's preference model does."""
    pm = SupervisedConfig.from_layers(_common(cfg), {
        "dataset": data.source, "test_dataset": data.test_source, "test_split": data.test_split,
        "batch_size": cfg.pm_batch_size, "num_epochs": cfg.pm_num_epochs,
        "learning_rate": cfg.pm_learning_rate, "max_length": cfg.max_length,
        "train_on_what": "last_assistant_message", "eval_every": cfg.pm_eval_every,
        "num_samples_to_show": 0, "register_model": False})  # fmt: skip

    def build(paths: SectionPaths, backend: Any) -> Workflow[SupervisedState]:
        parts = supervised_parts(
            pm, judge_row(data.convert), "rlhf_preference_model", JudgeAccuracyEvaluator()
        )
        nodes = limited(parts, data, cfg.max_comparisons, cfg.num_test_comparisons)
        return Workflow("preference_model", SupervisedState, nodes=nodes)

    return RunSection(section="preference_model", build=build)


def rl_section(cfg: RLHFPairPrefConfig, data: DatasetSplits) -> RunSection:
    """The SFT policy's weights are trained; the judge and the reference (the SFT policy, for the
    win rate) are frozen samplers on the earlier sections' final sampler paths."""

    def build(paths: SectionPaths, backend: Any) -> Workflow[RLState]:
        rl = RLConfig.from_layers(_common(cfg), {
            "group_size": cfg.group_size, "groups_per_batch": cfg.groups_per_batch,
            "num_batches": cfg.num_batches, "max_tokens": cfg.max_tokens,
            "temperature": cfg.temperature, "learning_rate": cfg.optimizer.learning_rate,
            "lr_schedule": cfg.optimizer.schedule,
            "load_checkpoint_path": paths["sft"]["state_path"], "eval_every": cfg.rl_eval_every,
            "register_model": cfg.register_model, "registry": cfg.registry,
            "registry_name": cfg.registry_name or "rlhf_pair_pref"})  # fmt: skip
        judge_path, sft_path = (
            paths["preference_model"]["sampler_path"],
            paths["sft"]["sampler_path"],
        )
        make = PreferenceRLDatasets(
            data.source, data.split, data.convert,
            make_judge=lambda renderer: GenerativePreferenceModel(
                backend.create_sampling_client(judge_path), renderer),
            group_size=cfg.group_size, groups_per_batch=cfg.groups_per_batch,
            test_source=data.test_source, test_split=data.test_split,
            open_reference=lambda: backend.create_sampling_client(sft_path),
            pattern=cfg.tournament, matchup_group_size=cfg.matchup_group_size,
            max_tokens=cfg.max_tokens, max_test_prompts=cfg.num_eval_prompts, seed=cfg.seed,
            decisions=cfg.judge_decisions,
        )  # fmt: skip
        return recording(preference_rl(rl, make, "rlhf_pair_pref"), cfg)

    return RunSection(section="rl", build=build, needs=("sft", "preference_model"))


class RLHFPairPref(Recipe[RLHFPairPrefConfig]):
    """RLHF: SFT, a pairwise preference model, then RL against it (win rate vs the SFT policy)."""

    name = "rlhf_pair_pref"
    Config = RLHFPairPrefConfig
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "cookbook": {  # recipes/preference/rlhf/rlhf_pipeline.py (its SFT set is NoRobots)
            "model_name": "Qwen/Qwen3.5-9B-Base",
            "backend": "tinker",
            "dataset": "hhh",
            "lora_rank": 64,
            "max_length": 16384,
            "sft_learning_rate": 2e-4,
            "sft_batch_size": 256,
            "pm_learning_rate": 3e-4,
            "pm_batch_size": 256,
            "pm_eval_every": 20,
            "learning_rate": 1e-5,
            "group_size": 4,
            "groups_per_batch": 256,
            "num_batches": None,
            "max_tokens": 1024,
            "tournament": "all_pairs_both_ways",
            "rl_eval_every": 20,
            "num_eval_prompts": 256,
            "max_comparisons": None,
            "num_test_comparisons": None,
            "save_every": 100,
        }
    }

    def workflow(self, cfg: RLHFPairPrefConfig) -> Workflow[RLHFState]:
        data = resolve_dataset(cfg.dataset, "comparison")
        make = {"sft": sft_section, "preference_model": preference_model_section, "rl": rl_section}
        sections = [make[s](cfg, data) for s in SECTIONS if s in cfg.sections]
        return sectioned(self.name, sections)
