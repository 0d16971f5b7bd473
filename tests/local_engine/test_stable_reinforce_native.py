"""stable_reinforce in the native RL workflows (beside the engine, from each datum's own sampler
logprobs and action mask) equals the served path (the engine's built-in, reading the sampler's
records through the datum's provenance, as `kitchen serve` runs it) on the same datums: the same
loss and the same gradients."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from tinker import types

from kitchen.ports import GRAD_NORM_METRIC
from train_core.completers import TokensWithLogprobs
from train_core.losses import stable_reinforce_beside_the_engine
from train_core.rl.data import datum_for_loss, trajectory_to_data
from train_core.rl.types import Trajectory, Transition

from .conftest import TINY, take_grads

PROMPT = [5, 17, 42, 99, 7]
CONFIG = {"ratio_cap": 1.05, "kl_coeff": 0.1}  # a cap some tokens reach at T = 1.5


def _rollout_datums(client: Any) -> list[types.Datum]:
    """Two sampled answers as the RL workflow turns them into datums (trajectory_to_data, then
    datum_for_loss): sampler logprobs and mask from the rollout, provenance from its sequence."""
    sampler = client.save_weights_and_get_sampling_client()
    params = types.SamplingParams(max_tokens=6, seed=4, stop=[], temperature=1.5)
    prompt = types.ModelInput.from_ints(PROMPT)
    result = sampler.sample(prompt, 2, params, record_stability_info=True).result()
    data = []
    for seq, advantage in zip(result.sequences, [1.0, -0.5], strict=True):
        action = TokensWithLogprobs(list(seq.tokens), list(seq.logprobs or []), seq.stop_reason,
                                    seq.sequence_id)  # fmt: skip
        traj = Trajectory([Transition(prompt, action, 0.0, True)], types.ModelInput.empty())
        data += [datum_for_loss(d, "stable_reinforce") for d in trajectory_to_data(traj, advantage)]
    assert all(d.loss_fn_input_spans for d in data)  # the served path can read the records
    return data


def test_native_stable_reinforce_equals_the_served_path(backend: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=1)
    data = _rollout_datums(client)
    served = client.forward_backward(data, "stable_reinforce", CONFIG).result()
    served_grads = take_grads(client)
    beside = stable_reinforce_beside_the_engine(CONFIG)
    native = client.forward_backward_custom(data, beside).result()
    native_grads = take_grads(client)
    assert native.metrics["loss:sum"] == pytest.approx(served.metrics["loss:sum"], rel=1e-5)
    assert served_grads.keys() == native_grads.keys() and served_grads
    for name, grad in served_grads.items():
        torch.testing.assert_close(native_grads[name], grad, rtol=1e-4, atol=1e-7, msg=name)
    # not a trivial agreement: the ratio is not 1 (T = 1.5), the cap binds somewhere, and the
    # gradient is there
    lp = np.concatenate([o["logprobs"].to_numpy() for o in served.loss_fn_outputs])
    q = np.concatenate([d.loss_fn_inputs["logprobs"].to_numpy() for d in data])
    on = np.concatenate([d.loss_fn_inputs["sampled_mask"].to_numpy() for d in data]) > 0
    ratio = np.exp(lp[on] - q[on])
    assert (ratio > CONFIG["ratio_cap"]).any() and (ratio < CONFIG["ratio_cap"]).any()
    assert sum(float(g.abs().sum()) for g in served_grads.values()) > 0


def test_the_rl_workflow_trains_with_it_on_the_local_engine(tmp_path: Any) -> None:
    """Two steps with the cookbook's rl_loop loss on the tiny model: each step trains (a gradient
    from the rollouts' own logprobs). The tiny model's reward is constant, so the advantages come
    from the KL penalty, against the other tiny model: against its own base, which the untrained
    adapter equals, the penalty was rounding noise (exactly 0 on an Intel Xeon with AMX)."""
    from kitchen.app.launch import run
    from kitchen.app.resolve import resolve_config

    assert resolve_config("rl_loop", preset="cookbook").config.loss_fn == "stable_reinforce"
    values = {"model_name": TINY, "loss_fn": "stable_reinforce", "group_size": 2,
              "groups_per_batch": 1, "max_tokens": 6, "kl_penalty_coef": 0.5,
              "remove_constant_reward_groups": False, "num_test_problems": 0, "eval_every": 0,
              "kl_reference_model": "kitchen/tiny-qwen", "no_register": True,
              "save_every": 0}  # fmt: skip
    result = run("rl_basic", values, backend="local", log_dir=tmp_path / "run", max_steps=2)
    grads = [m[GRAD_NORM_METRIC] for m in result.metrics if GRAD_NORM_METRIC in m]
    assert result.steps == 2 and len(grads) == 2 and all(g > 0 for g in grads)
    assert np.isfinite(result.state.ppo_metrics["policy_loss"])
    assert result.state.ppo_metrics["policy_loss"] != 0.0
