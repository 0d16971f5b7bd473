"""code_rl end to end on the fake backend (its sandbox is the real local one): each knob changes
what is sent to the backend, and nothing is accepted and ignored."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from cookbook.recipes.code_rl import CodeRLConfig
from kitchen.adapters.fake.backend import FakeBackend, FakeTrainingClient
from kitchen.app.launch import run
from kitchen.app.resolve import get_recipe, resolve_config
from kitchen.engine.errors import ConfigError

SUM_ROW = {
    "id": "sum",
    "problem": "Read two integers a and b on one line and print a + b.",
    "starter_code": None,
    "tests": [
        {"input": "1 2\n", "output": "3\n", "testtype": "stdin_stdout", "metadata": {}},
        {"input": "4 4\n", "output": "8\n", "testtype": "stdin_stdout", "metadata": {}},
    ],
}
RIGHT = "a, b = map(int, input().split())\nprint(a + b)"
WRONG = "a, b = map(int, input().split())\nprint(a - b)"


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def check_call(code: str) -> str:
    payload = {"name": "check_solution", "arguments": {"code": code}}
    return f"<tool_call>\n{json.dumps(payload)}\n</tool_call>"


def tool_then_answer_responder():
    """First turns alternate: call check_solution (then answer right: rewards [0, 1]) or answer
    wrong at once (reward [0]). Identical prompts are sampled together, so each group of 2 holds
    one episode of each kind."""
    calls = {"n": 0}

    def respond(prompt_tokens: list[int]) -> str:
        text = bytes(t for t in prompt_tokens if t < 256).decode("utf-8", "replace")
        if '"passed"' in text:  # the tool's verdict is in the conversation: answer
            return fenced(RIGHT)
        calls["n"] += 1
        return check_call(RIGHT) if calls["n"] % 2 == 1 else fenced(WRONG)

    return respond


class Recorder:
    """What forward_backward received: per call, the loss, its config and the datums."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, Any, list[Any]]] = []
        original = FakeTrainingClient.forward_backward
        recorder = self

        def forward_backward(client, data, loss_fn, loss_fn_config=None):
            recorder.calls.append((loss_fn, loss_fn_config, list(data)))
            return original(client, data, loss_fn, loss_fn_config)

        monkeypatch.setattr(FakeTrainingClient, "forward_backward", forward_backward)

    def advantages(self, call: int = 0) -> set[float]:
        values = np.concatenate(
            [d.loss_fn_inputs["advantages"].to_numpy() for d in self.calls[call][2]]
        )
        return {round(float(v), 6) for v in values if v != 0}


@pytest.fixture
def sum_data(tmp_path):
    path = tmp_path / "sum.jsonl"
    path.write_text(json.dumps(SUM_ROW) + "\n")
    return str(path)


def run_fake(overrides: dict[str, Any], backend: FakeBackend | None = None, **kw: Any):
    backend = backend or FakeBackend()
    # one optimizer pass per batch (the recipe's default is crucible_kitchen's 4), so calls count 1:1
    base = {"model_name": "kitchen/tiny-llama", "no_register": True, "humaneval_limit": 0,
            "ppo_epochs": 1}  # fmt: skip
    result = run("code_rl", {**base, **overrides}, backend=backend, **kw)
    assert backend.unawaited == 0
    return result, backend


def gae_run(monkeypatch, sum_data, **knobs):
    recorder = Recorder(monkeypatch)
    overrides = {"dataset": sum_data, "num_batches": 1, "group_size": 2, "groups_per_batch": 1,
                 "max_tokens": 512, "advantage_estimator": "gae", "gamma": 1.0, "gae_lambda": 1.0,
                 **knobs}  # fmt: skip
    result, _ = run_fake(overrides, FakeBackend(responder=tool_then_answer_responder()))
    assert result.metrics[0]["env/all/turns_per_episode"] == 1.5  # one 2-turn, one 1-turn episode
    return recorder.advantages()


def test_gamma_and_gae_lambda_change_the_advantages_sent(monkeypatch, sum_data):
    # Episodes: rewards [0, 1] and [0]. gamma = lambda = 1: both turns get 1 - 0.5, the other -0.5.
    assert gae_run(monkeypatch, sum_data) == {0.5, -0.5}
    # lambda 0.5: the first turn gets lambda * (1 - 0.5).
    assert gae_run(monkeypatch, sum_data, gae_lambda=0.5) == {0.25, 0.5, -0.5}
    # gamma 0.5: discounted returns 0.5 and 0, baseline 0.25; turns get 0.5 - 0.25, 1 - 0.25.
    assert gae_run(monkeypatch, sum_data, gamma=0.5) == {0.25, 0.75, -0.25}


def test_clip_epsilon_sets_the_ppo_clip_thresholds(monkeypatch):
    recorder = Recorder(monkeypatch)
    run_fake({"num_batches": 1, "clip_epsilon": 0.1, "loss_fn": "ppo"})
    assert [(c[0], c[1]) for c in recorder.calls] == [
        ("ppo", {"clip_low_threshold": 0.9, "clip_high_threshold": 1.1})
    ]
    recorder.calls.clear()
    run_fake({"num_batches": 1, "clip_epsilon": None, "loss_fn": "ppo"})
    assert [(c[0], c[1]) for c in recorder.calls] == [("ppo", None)]


def test_ppo_epochs_repeat_the_update_on_the_same_rollouts(monkeypatch):
    recorder = Recorder(monkeypatch)
    _, backend = run_fake(
        {"num_batches": 2, "ppo_epochs": 3, "group_size": 2, "groups_per_batch": 2}
    )
    assert backend.calls.count("forward_backward") == 6
    assert backend.calls.count("optim_step") == 6
    # The second step samples from the weights after the first step's three updates.
    assert backend.sample_policy_versions == [0] * 4 + [3] * 4
    step0 = [c[2] for c in recorder.calls[:3]]
    assert step0[0] == step0[1] == step0[2]  # same datums, sampler logprobs = the old policy
    assert step0[0] != recorder.calls[3][2]


def test_num_rollouts_is_the_number_of_iterations_never_the_group_size(monkeypatch):
    cfg = CodeRLConfig(num_rollouts=3)
    assert (cfg.num_batches, cfg.group_size) == (3, 4)
    result, backend = run_fake({"num_rollouts": 2, "group_size": 3, "groups_per_batch": 2})
    assert len(backend.sample_policy_versions) == 12  # 2 iterations x 2 problems x 3 rollouts
    assert result.state.step == 2
    assert [len(g.trajectories_G) for g in result.state.trajectory_groups] == [3, 3]


def test_env_picks_the_problem_set(tmp_path, sum_data):
    run_fake({"num_batches": 1, "env": "deepcoder", "dataset": sum_data}, log_dir=tmp_path / "d")
    run_fake({"num_batches": 1, "env": "bundled"}, log_dir=tmp_path / "b")
    deep = [json.loads(x) for x in (tmp_path / "d/rollouts/iter_000000.jsonl").open()]
    bundled = [json.loads(x) for x in (tmp_path / "b/rollouts/iter_000000.jsonl").open()]
    assert {tuple(r["tags"]) for r in deep} == {("deepcoder",)}
    assert {tuple(r["tags"]) for r in bundled} == {("bundled",)}
    assert SUM_ROW["problem"] in deep[0]["trajectories"][0]["turns"][0]["prompt"]
    assert SUM_ROW["problem"] not in bundled[0]["trajectories"][0]["turns"][0]["prompt"]


def test_humaneval_runs_before_and_after_and_reaches_the_registry():
    result, _ = run_fake({"num_batches": 1, "humaneval_limit": 2, "no_register": False})
    records = [m for m in result.metrics if "humaneval/pass@1" in m]
    assert [r["step"] for r in records] == [0, 1]
    assert records[0]["humaneval/num_problems"] == 2
    state = result.state
    assert {"humaneval_before/pass@1", "humaneval/pass@1"} <= set(state.eval_results)
    assert state.registered_model is not None and state.sandbox is None  # closed in finally


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"advantage_estimator": "group_mean", "gamma": 0.9}, "apply to the gae estimator"),
        ({"loss_fn": "importance_sampling", "clip_epsilon": 0.2}, "set loss_fn ppo"),
        ({"loss_fn_config": {"clip_low_threshold": 0.5}}, "both set clip_low_threshold"),
        ({"humaneval_k": 5}, "humaneval_k 5"),
        ({"humaneval_samples": 4}, "humaneval_temperature"),
        ({"eval_every": 5}, "needs test problems"),
        ({"sandbox_url": "http://x"}, "only for sandbox http"),
        ({"gae_lambda": 1.5}, "--gae-lambda: Input should be less than or equal to 1"),
    ],
)
def test_knobs_that_would_be_ignored_are_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        resolve_config(get_recipe("code_rl"), values=overrides)


def test_cookbook_preset_is_tinker_cookbooks_code_rl():
    cfg = resolve_config(get_recipe("code_rl"), preset="cookbook").config
    assert (cfg.model_name, cfg.group_size, cfg.groups_per_batch) == ("Qwen/Qwen3.5-9B", 4, 100)
    assert (cfg.optimizer.learning_rate, cfg.max_tokens, cfg.lora_rank) == (1e-5, 4096, 32)
    assert (cfg.sandbox, cfg.sandbox_timeout, cfg.max_turns) == ("http", 6.0, 2)
    assert (cfg.env, cfg.loss_fn, cfg.advantage_estimator) == ("deepcoder", "importance_sampling", "group_mean")  # fmt: skip
    assert cfg.effective_loss_fn_config() is None
