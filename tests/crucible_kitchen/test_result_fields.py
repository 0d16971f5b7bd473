"""crucible_kitchen's programmatic results on the fake backend: eval_results (its bare keys),
registered_model, dpo_metrics, rollout_metrics, ppo_metrics; and the local engine's ppo
diagnostics and LoRA size match what the dry run and the result promise."""

from __future__ import annotations

from pathlib import Path

from kitchen import run
from kitchen.adapters.fake import FakeBackend

TINY = {"model": "kitchen/tiny-llama", "save_every": 0, "registry": None}


def test_supervised_result_has_seed_eval_keys_and_registered_model(tmp_path: Path) -> None:
    values = {**TINY, "registry": str(tmp_path / "reg.db"), "register_model": True,
              "batch_size": 16, "epochs": 1, "n_train_samples": 32, "eval_labels": True,
              "eval_every": 0, "num_samples_to_show": 0}  # fmt: skip
    state = run("supervised", values, backend="fake").state
    assert len(state.conversations) == 32  # n_train_samples
    assert {"nll", "accuracy", "f1", "precision", "recall"} <= set(state.eval_results)
    assert state.eval_results["nll"] == state.eval_results["test/nll"]
    assert {"id", "name", "version"} <= set(state.registered_model)
    assert state.registered_model["name"] == "supervised"


def test_dpo_result_has_dpo_metrics_of_the_last_step(tmp_path: Path) -> None:
    values = {**TINY, "no_register": True, "batch_size": 4, "n_train_samples": 8, "eval_every": 0,
              "test_size": 4}  # fmt: skip
    result = run("dpo", values, backend="fake")
    dpo = result.state.dpo_metrics
    assert set(dpo) == {"loss", "accuracy", "margin", "chosen_reward", "rejected_reward"}
    last = [m for m in result.metrics if "dpo_loss" in m][-1]
    assert dpo["loss"] == last["dpo_loss"] and dpo["margin"] == last["margin"]
    assert "accuracy" in result.state.eval_results  # pairwise accuracy, crucible_kitchen's key


def test_code_rl_result_has_rollout_and_ppo_metrics(tmp_path: Path) -> None:
    values = {**TINY, "no_register": True, "humaneval_limit": 0, "num_rollouts": 2,
              "groups_per_batch": 2, "group_size": 2, "ppo_epochs": 2}  # fmt: skip
    state = run("code_rl", values, backend=FakeBackend()).state
    rollout = state.rollout_metrics
    assert rollout["num_trajectories"] == 4.0 and rollout["reward_std"] >= 0
    rewards = [r for g in state.trajectory_groups for r in g.get_total_rewards()]
    assert rollout["reward_mean"] == sum(rewards) / len(rewards)
    assert {"policy_loss", "entropy"} <= set(state.ppo_metrics)


def test_local_engine_reports_clip_fraction_and_policy_loss_for_ppo(tmp_path: Path) -> None:
    values = {**TINY, "no_register": True, "humaneval_limit": 0, "num_rollouts": 1,
              "groups_per_batch": 1, "group_size": 4, "max_tokens": 24, "ppo_epochs": 2,
              "learning_rate": 5e-2, "clip_epsilon": 0.01}  # fmt: skip
    state = run("code_rl", values, backend="local").state
    ppo = state.ppo_metrics
    assert set(ppo) == {"policy_loss", "clip_fraction", "entropy"}
    assert 0.0 <= ppo["clip_fraction"] <= 1.0


def test_dry_run_lora_count_equals_the_local_engine_trainable_parameters() -> None:
    from kitchen.adapters.local.backend import LocalBackend
    from kitchen.adapters.local.model.lora import adapter_parameters
    from kitchen.app.model_dims import model_dims
    from kitchen.ports import BackendSettings
    from train_core.hyperparams import lora_param_count

    backend = LocalBackend(BackendSettings())
    client = backend.create_lora_training_client("kitchen/tiny-llama", rank=8)
    params = adapter_parameters(client.host.model, client.adapter).values()
    trainable = sum(p.numel() for p in params)
    backend.close()
    dims = model_dims("kitchen/tiny-llama")
    assert dims is not None and lora_param_count(dims, 8) == trainable
