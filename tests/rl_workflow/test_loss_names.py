"""One table of loss names (train_core.losses.LOSSES): the RL config takes names it holds, the
local engine and the fake backend run its formulas, and the fake refuses a loss or an input it
lacks instead of training on zeros (issue 33: gspo on the fake gave loss 0 and gradient 0)."""

from __future__ import annotations

import math
from typing import Any, get_args

import numpy as np
import pytest
from tinker import types

from cookbook.envs.arithmetic import ArithmeticEnvs
from kitchen.adapters.fake import FakeBackend
from kitchen.adapters.fake.backend import FakeTrainingClient
from kitchen.adapters.local.train.loss_fns import loss_fn_named
from kitchen.app.launch import run_workflow
from kitchen.engine.errors import BackendError
from kitchen.ports import GRAD_NORM_METRIC
from kitchen.workflows.reinforcement import RLConfig, reinforcement
from train_core.losses import LOSSES

THETA = -2.0  # every target logprob of the fake's untrained model
Q_T = [0.0, -2.5, -1.5, -2.4]  # the sampler's logprobs; the prompt position has none (0)
A_T = [0.0, 1.5, 1.5, 1.5]  # one sampled answer's advantage, 0 on the prompt
MASK_T = [0.0, 1.0, 1.0, 1.0]  # its sampled tokens


def datum(**extra: list[float]) -> types.Datum:
    columns = {"logprobs": Q_T, "advantages": A_T, "sequence_ratio_mask": MASK_T,
               "sampled_mask": MASK_T, **extra}  # fmt: skip
    inputs = {k: types.TensorData.from_numpy(np.asarray(v, np.float32)) for k, v in columns.items()}
    inputs["target_tokens"] = types.TensorData.from_numpy(np.arange(1, 5, dtype=np.int64))
    return types.Datum(model_input=types.ModelInput.from_ints([5, 1, 2, 3]), loss_fn_inputs=inputs)


def train(loss_fn: str, config: dict[str, float] | None = None) -> tuple[float, float]:
    """loss:sum of one forward_backward on the fake, and the gradient norm its optim_step reports."""
    client = FakeBackend().create_lora_training_client("fake")
    out = client.forward_backward([datum()], loss_fn, config).result()
    step = client.optim_step(types.AdamParams(learning_rate=1e-3)).result()
    return out.metrics["loss:sum"], step.metrics[GRAD_NORM_METRIC]


def test_gspo_on_the_fake_follows_the_sequence_ratio() -> None:
    # GSPO written out: the sampled tokens' geometric-mean ratio r, each token's value r * A (r is
    # inside [0.8, 1.2], so unclipped) and its gradient d(r * A)/d(log p_t) = r * A.
    sampled = [t for t, m in enumerate(MASK_T) if m]
    r = math.exp(sum(THETA - Q_T[t] for t in sampled) / len(sampled))
    assert 0.8 < r < 1.2
    loss, grad_norm = train("gspo")
    assert loss == pytest.approx(-r * sum(A_T))
    assert grad_norm == pytest.approx(r * sum(A_T))
    # not importance sampling's per-token ratios
    assert loss != pytest.approx(-sum(math.exp(THETA - Q_T[t]) * A_T[t] for t in sampled))


def test_gspo_clips_the_sequence_ratio() -> None:
    # r = 1.14 > 1.1: the clipped term is the min for a positive advantage, and it has no gradient
    loss, grad_norm = train("gspo", {"clip_low_threshold": 0.9, "clip_high_threshold": 1.1})
    assert loss == pytest.approx(-1.1 * sum(A_T))
    assert grad_norm == 0.0


@pytest.mark.parametrize("loss_fn", get_args(RLConfig.model_fields["loss_fn"].annotation))
def test_every_loss_the_config_takes_trains_on_the_fake_and_the_engine(loss_fn: str) -> None:
    loss, grad_norm = train(loss_fn)
    assert loss != 0.0 and grad_norm > 0.0
    assert loss_fn_named(loss_fn) is LOSSES[loss_fn]  # the local engine runs the same formula


def test_a_loss_the_fake_does_not_model_is_refused() -> None:
    client = FakeBackend().create_lora_training_client("fake")
    with pytest.raises(BackendError, match="'made_up' is not one it models"):
        client.forward_backward([datum()], "made_up")  # type: ignore[arg-type]
    # stable_reinforce's sampled_mask comes from the sampler's records (served) or the datum's
    # action mask (native); the fake keeps no records
    unmasked = datum()
    del unmasked.loss_fn_inputs["sampled_mask"]
    with pytest.raises(
        BackendError, match=r"datum 0: loss_fn 'stable_reinforce' needs \['sampled_mask'\]"
    ):
        client.forward_backward([unmasked], "stable_reinforce")


def test_gspo_runs_through_the_rl_workflow_with_its_sequence_mask(monkeypatch: Any) -> None:
    """The RL step hands gspo the datums' action mask as sequence_ratio_mask (which the engine
    and the fake need), and only to gspo."""
    sent: list[tuple[str, types.Datum]] = []
    original = FakeTrainingClient.forward_backward

    def forward_backward(self: Any, data: Any, loss_fn: Any, loss_fn_config: Any = None) -> Any:
        sent.extend((loss_fn, d) for d in data)
        return original(self, data, loss_fn, loss_fn_config)

    monkeypatch.setattr(FakeTrainingClient, "forward_backward", forward_backward)
    for loss_fn in ("gspo", "ppo"):
        cfg = RLConfig(groups_per_batch=2, group_size=2, num_batches=2, max_tokens=8,
                       eval_every=0, save_every=0, loss_fn=loss_fn)  # fmt: skip
        envs = ArithmeticEnvs(2, 2, n_batches=4, max_operand=20)
        run_workflow(reinforcement(cfg, envs), backend=FakeBackend())
    gspo = [d for loss_fn, d in sent if loss_fn == "gspo"]
    assert gspo and len(gspo) < len(sent)
    for d in gspo:
        sampled_T = d.loss_fn_inputs["logprobs"].to_numpy() != 0  # the prompt has no logprob
        assert (d.loss_fn_inputs["sequence_ratio_mask"].to_numpy() == sampled_T).all()
    assert all("sequence_ratio_mask" not in d.loss_fn_inputs for f, d in sent if f == "ppo")
    assert all("mask" not in d.loss_fn_inputs for _, d in sent)
