"""forward_backward_custom linearises the loss: its gradients equal backpropagating the user loss
through one graph over the whole batch (the path it replaced), across several micro-batches."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import torch
from tinker import types

from kitchen.adapters.local.train import logprobs
from tests.helpers import engine_device

from .conftest import TEXTS, TINY, sft_datum, take_grads


def pair_loss(
    data: list[types.Datum], logprobs: list[torch.Tensor]
) -> tuple[Any, dict[str, float]]:
    """A DPO-shaped loss: it couples data (chosen = even, rejected = odd) through a nonlinearity."""
    sums = torch.stack([lp.sum() for lp in logprobs])
    margin = sums[0::2] - sums[1::2]
    loss = -torch.nn.functional.logsigmoid(0.1 * margin).sum()
    return loss, {"margin": float(margin.detach().mean())}


def one_graph_grads(client: Any, data: list[types.Datum]) -> tuple[dict[str, torch.Tensor], float]:
    """The old path: every datum's logprobs from full logits in one graph, then loss.backward()."""
    per_datum = []
    with client.host.use(client.adapter) as model, torch.enable_grad():
        for d in data:
            tokens = torch.tensor([d.model_input.to_ints()], device=engine_device())
            targets = torch.tensor(
                d.loss_fn_inputs["target_tokens"].to_numpy(), device=engine_device()
            )
            logits = model(input_ids=tokens, use_cache=False).logits[0]
            per_datum.append(torch.log_softmax(logits, -1).gather(-1, targets[:, None])[:, 0])
        loss, _ = pair_loss(data, per_datum)
        loss.backward()
    return take_grads(client), float(loss.detach())


def test_linearised_custom_loss_equals_one_graph(backend: Any, monkeypatch: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=3)
    # Nudge B away from 0 so every LoRA factor gets a gradient.
    client.forward_backward([sft_datum(client.get_tokenizer(), TEXTS[0])], "cross_entropy")
    client.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    take_grads(client)
    data = [sft_datum(client.get_tokenizer(), t) for t in [*TEXTS, TEXTS[0][::-1]]]
    expected, expected_loss = one_graph_grads(client, data)
    # Tiny micro-batches and vocabulary chunks, so both splits are exercised.
    monkeypatch.setattr(logprobs, "LOGIT_CHUNK_TOKENS", 5)
    monkeypatch.setattr(
        client.passes, "settings", replace(client.passes.settings, microbatch_tokens=20)
    )
    out = client.forward_backward_custom(data, pair_loss).result()
    got = take_grads(client)
    assert out.metrics["loss:sum"] == pytest.approx(expected_loss, rel=1e-5)
    assert got.keys() == expected.keys() and got
    for key in expected:
        torch.testing.assert_close(got[key], expected[key], rtol=1e-4, atol=1e-6)
