"""stable_reinforce: the formula, and the sampler's records read through provenance spans."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from tinker import types

from kitchen.engine.errors import BackendError
from train_core.losses import DEFAULT_KL_COEFF, stable_reinforce

from .conftest import TINY

PROMPT = [5, 17, 42, 99, 7]


def test_formula_is_truncated_reinforce_plus_the_sampler_kl() -> None:
    lp = torch.tensor([[-1.0, -2.0, -0.1, -0.7]], requires_grad=True)
    q = np.array([-1.2, -1.0, -3.0, -0.7])
    a = np.array([1.0, -2.0, 0.5, 3.0])
    mask = np.array([1.0, 1.0, 1.0, 0.0])
    inputs = {
        "logprobs": torch.tensor(q[None], dtype=torch.float32),
        "advantages": torch.tensor(a[None], dtype=torch.float32),
        "sampled_mask": torch.tensor(mask[None], dtype=torch.float32),
    }
    loss = stable_reinforce(lp, inputs, {"ratio_cap": 2.0, "kl_coeff": 0.1})
    x = lp.detach().numpy()[0]
    r = np.exp(x - q)
    want = mask * (-(np.minimum(r, 2.0) * x * a) + 0.1 * (r - 1 - np.log(r)))
    np.testing.assert_allclose(loss.detach().numpy()[0], want, rtol=1e-5)
    loss.sum().backward()
    # d/dlp: -min(r, cap) * A + kl_coeff * (r - 1); the weight is not differentiated.
    want_grad = mask * (-(np.minimum(r, 2.0) * a) + 0.1 * (r - 1))
    np.testing.assert_allclose(lp.grad.numpy()[0], want_grad, rtol=1e-5)


def _sampled_datum(prompt: list[int], seq: types.SampledSequence, advantage: float) -> types.Datum:
    tokens = [*prompt, *seq.tokens]
    n_prompt, n_sampled = len(prompt), len(seq.tokens)
    advantages = np.zeros(len(tokens) - 1, np.float32)
    advantages[n_prompt - 1 :] = advantage
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": np.asarray(tokens[1:], np.int64),
            "logprobs": np.zeros(len(tokens) - 1, np.float32),  # ignored: the records say
            "advantages": advantages,
        },
    )
    sid = seq.sequence_id or ""
    return datum.with_provenance(
        model_input=[
            types.PromptProvenanceSpan(sequence_id=sid, length=n_prompt),
            types.SampledProvenanceSpan(sequence_id=sid, length=n_sampled - 1),
        ],
        loss_fn_inputs=[
            types.PromptProvenanceSpan(sequence_id=sid, offset=1, length=n_prompt - 1),
            types.SampledProvenanceSpan(sequence_id=sid, length=n_sampled),
        ],
    )


@pytest.fixture(scope="module")
def client(backend: Any) -> Any:
    return backend.create_lora_training_client(TINY, rank=4, seed=1)


def _sample(client: Any, record: bool, temperature: float = 1.5) -> types.SampledSequence:
    sampler = client.save_weights_and_get_sampling_client()
    params = types.SamplingParams(max_tokens=6, seed=4, stop=[], temperature=temperature)
    prompt = types.ModelInput.from_ints(PROMPT)
    return sampler.sample(prompt, 1, params, record_stability_info=record).result().sequences[0]


def test_loss_reads_the_recorded_sampler_logprobs_and_raises_the_rewarded_tokens(
    client: Any,
) -> None:
    seq = _sample(client, record=True)
    datum = _sampled_datum(PROMPT, seq, advantage=1.0)
    out = client.forward([datum], "stable_reinforce").result()
    lp = out.loss_fn_outputs[0]["logprobs"].to_numpy()[len(PROMPT) - 1 :]
    q = np.asarray(seq.logprobs)  # tempered at T = 1.5: the learner's ratio is not 1
    r = np.exp(lp - q)
    want = np.sum(-(np.minimum(r, 2.0) * lp) + DEFAULT_KL_COEFF * (r - 1 - np.log(r)))
    assert out.metrics["loss:sum"] == pytest.approx(float(want), rel=1e-4)
    client.forward_backward([datum], "stable_reinforce").result()
    client.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    after = client.forward([datum], "stable_reinforce").result()
    lp_after = after.loss_fn_outputs[0]["logprobs"].to_numpy()[len(PROMPT) - 1 :]
    assert lp_after.sum() > lp.sum()


def test_unrecorded_or_altered_sequences_are_refused(client: Any) -> None:
    unrecorded = _sample(client, record=False)
    with pytest.raises(BackendError, match="has no stability record"):
        client.forward([_sampled_datum(PROMPT, unrecorded, 1.0)], "stable_reinforce").result()
    seq = _sample(client, record=True)
    other_token = (seq.tokens[0] + 1) % 500
    altered = types.SampledSequence(
        stop_reason=seq.stop_reason,
        tokens_np=np.asarray([other_token, *seq.tokens[1:]], np.int32),
        logprobs_np=np.asarray(seq.logprobs, np.float32),
        sequence_id=seq.sequence_id,
    )
    with pytest.raises(BackendError, match="differ from the tokens sequence"):
        client.forward([_sampled_datum(PROMPT, altered, 1.0)], "stable_reinforce").result()
