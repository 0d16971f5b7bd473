import math

import numpy as np
import pytest
from tinker import types

from train_core.preference import (
    dpo_loss,
    dpo_losses,
    make_dpo_loss_fn,
    pair_logratios,
    preference_metrics,
)
from train_core.supervised import datum_from_model_input_weights


def _direct_losses(chosen, rejected, beta):
    return np.array(
        [
            -math.log(1 / (1 + math.exp(-beta * (c - r))))
            for c, r in zip(chosen, rejected, strict=True)
        ]
    )


def test_loss_and_metrics_match_the_direct_formula_on_random_inputs():
    rng = np.random.default_rng(0)
    chosen, rejected = rng.normal(0, 3, 64), rng.normal(0, 3, 64)
    beta = 0.1
    out = dpo_loss(chosen, rejected, beta)
    assert out.loss == pytest.approx(_direct_losses(chosen, rejected, beta).mean(), rel=1e-12)
    assert out.accuracy == pytest.approx(np.mean(chosen > rejected))
    assert out.chosen_reward == pytest.approx(beta * chosen.mean())
    assert out.rejected_reward == pytest.approx(beta * rejected.mean())
    # tinker-cookbook issue 21: beta enters the margin once, through the rewards.
    assert out.margin == pytest.approx(beta * (chosen - rejected).mean())
    assert out.margin == pytest.approx(out.chosen_reward - out.rejected_reward)
    assert out.num_pairs == 64
    assert set(out.metrics()) == {
        "dpo_loss",
        "accuracy",
        "margin",
        "chosen_reward",
        "rejected_reward",
        "num_pairs",
    }


@pytest.mark.parametrize("margin", [100.0, -100.0, 1e4, -1e4])
def test_loss_is_finite_and_right_at_extreme_margins(margin):
    losses = dpo_losses([margin], [0.0], beta=1.0)
    assert np.all(np.isfinite(losses))
    if margin > 0:
        assert losses[0] == pytest.approx(math.exp(-margin), abs=1e-40)
    else:
        assert losses[0] == pytest.approx(-margin)
    torch = pytest.importorskip("torch")
    chosen = torch.tensor([margin], dtype=torch.float64, requires_grad=True)
    dpo_losses(chosen, torch.zeros(1, dtype=torch.float64), beta=1.0).sum().backward()
    assert torch.isfinite(chosen.grad).all()


def test_the_torch_loss_is_the_numpy_loss_and_its_gradient_is_the_closed_form():
    """One formula for both: torch in, the same values, and autograd gives
    d/dc softplus(-beta (c - r)) = -beta sigmoid(-beta (c - r)) (and its negative for r)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    chosen, rejected, beta = rng.normal(0, 3, 8), rng.normal(0, 3, 8), 0.5
    chosen_t = torch.tensor(chosen, requires_grad=True)
    rejected_t = torch.tensor(rejected, requires_grad=True)
    losses_t = dpo_losses(chosen_t, rejected_t, beta)
    np.testing.assert_allclose(losses_t.detach().numpy(), dpo_losses(chosen, rejected, beta))
    losses_t.mean().backward()
    sigmoid = 1 / (1 + np.exp(beta * (chosen - rejected)))
    np.testing.assert_allclose(chosen_t.grad.numpy(), -beta * sigmoid / 8, rtol=1e-12)
    np.testing.assert_allclose(rejected_t.grad.numpy(), beta * sigmoid / 8, rtol=1e-12)
    assert (chosen_t.grad < 0).all() and (rejected_t.grad > 0).all()


def test_bad_batches_fail_clearly():
    with pytest.raises(ValueError, match="expected pairs"):
        dpo_loss([1.0, 2.0], [1.0], 0.1)
    with pytest.raises(ValueError, match="no pairs"):
        dpo_loss([], [], 0.1)
    with pytest.raises(ValueError, match="beta"):
        dpo_loss([1.0], [0.0], 0.0)


def _pair_data():
    # two pairs, interleaved chosen/rejected; weights mark the completion tokens
    return [
        datum_from_model_input_weights(types.ModelInput.from_ints(t), w)
        for t, w in [
            ([1, 2, 3, 4], [0, 0, 1, 1]),
            ([1, 2, 5, 6, 7], [0, 0, 1, 1, 1]),
            ([1, 8, 9], [0, 1, 1]),
            ([1, 8, 10], [0, 1, 1]),
        ]
    ]


def test_custom_loss_fn_matches_numpy_and_pushes_chosen_up():
    torch = pytest.importorskip("torch")
    data = _pair_data()
    rng = np.random.default_rng(2)
    policy = [
        torch.tensor(rng.normal(-2, 1, d.model_input.length), requires_grad=True) for d in data
    ]
    ref_tokens = [rng.normal(-2, 1, d.model_input.length) for d in data]
    weights = [np.asarray(d.loss_fn_inputs["weights"].data) for d in data]
    ref_sums = [float(r @ w) for r, w in zip(ref_tokens, weights, strict=True)]
    beta = 0.3

    loss_fn = make_dpo_loss_fn(ref_tokens, beta)
    loss, metrics = loss_fn(data, policy)
    loss.backward()

    policy_sums = [float(p.detach().numpy() @ w) for p, w in zip(policy, weights, strict=True)]
    logratio = np.array(policy_sums) - np.array(ref_sums)
    expected = dpo_loss(logratio[0::2], logratio[1::2], beta)
    assert loss.item() == pytest.approx(expected.loss, rel=1e-5)
    assert metrics == pytest.approx(expected.metrics(), rel=1e-5)
    # gradient descent raises chosen-token logprobs and lowers rejected ones; unweighted get none
    for i, (p, w) in enumerate(zip(policy, weights, strict=True)):
        grad = p.grad.numpy()
        assert np.all(grad[w == 0] == 0)
        assert np.all(grad[w > 0] < 0) if i % 2 == 0 else np.all(grad[w > 0] > 0)
    # the same loss from precomputed reference sums
    loss_from_sums, _ = make_dpo_loss_fn(ref_sums, beta)(data, policy)
    assert loss_from_sums.item() == pytest.approx(loss.item(), rel=1e-6)


def test_custom_loss_fn_rejects_a_batch_that_is_not_interleaved_pairs():
    torch = pytest.importorskip("torch")
    data = _pair_data()[:3]
    with pytest.raises(ValueError, match="interleaved"):  # a datum short of the reference
        make_dpo_loss_fn([0.0] * 4, 0.1)(data, [torch.zeros(d.model_input.length) for d in data])
    with pytest.raises(ValueError, match="interleaved"):  # an odd batch is not pairs
        make_dpo_loss_fn([0.0] * 3, 0.1)(data, [torch.zeros(d.model_input.length) for d in data])


def test_preference_metrics_report_accuracy_and_chosen_nll():
    data = _pair_data()
    policy = [np.full(d.model_input.length, -1.0) for d in data]
    policy[1][:] = -3.0  # pair 0: rejected less likely under the policy
    reference = [np.full(d.model_input.length, -1.0) for d in data]
    metrics = preference_metrics(policy, reference, data, beta=0.1, name="val")
    assert metrics["val/pairwise_accuracy"] == pytest.approx(0.5)  # pair 1 is a tie -> not counted
    assert metrics["val/chosen_nll"] == pytest.approx(1.0)
    assert metrics["val/num_pairs"] == 2
    assert metrics["val/margin"] == pytest.approx(0.1 * (6.0 + 0.0) / 2)


def test_pair_logratios_split_policy_minus_reference_pair_by_pair():
    policy_D, reference_D = np.array([-1.0, -3.0, -2.0, -2.5]), np.array([-1.5, -1.0, -2.0, -2.0])
    chosen_B, rejected_B = pair_logratios(policy_D, reference_D)
    np.testing.assert_array_equal(chosen_B, [0.5, 0.0])
    np.testing.assert_array_equal(rejected_B, [-2.0, -0.5])
    with pytest.raises(ValueError, match="interleaved"):
        pair_logratios(policy_D[:3], reference_D[:3])
    with pytest.raises(ValueError, match="reference"):
        pair_logratios(policy_D, reference_D[:2])
