"""Built-in losses backpropagate the head chunk by chunk and only where the loss has a gradient
(logprobs.py): their gradients and outputs equal one graph over full logits, for every loss, across
micro-batches and vocabulary chunks smaller than a datum."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import torch
from tinker import types

from kitchen.adapters.local.model.lora import adapter_parameters
from kitchen.adapters.local.train import logprobs
from kitchen.adapters.local.train.forward import run_builtin_loss
from kitchen.adapters.local.train.pass_settings import PassSettings
from tests.helpers import engine_device, engine_generator
from train_core.losses import LOSSES

from .conftest import TINY, take_grads

PROMPTS = [[5, 17, 42, 99, 7, 3, 11], [8, 9, 10], [21, 22, 23, 24, 25]]
COMPLETIONS = [[123, 44, 9], [300, 2, 71, 5, 6], [12]]


def rl_data(
    loss_fn: str,
    pairs: Sequence[tuple[list[int], list[int]]] = tuple(zip(PROMPTS, COMPLETIONS, strict=True)),
    seed: int = 0,
) -> list[types.Datum]:
    """A datum per (prompt, completion): prompt positions carry weight / advantage 0 (as RL and SFT
    data do); completions do not."""
    rng = np.random.default_rng(seed)
    data = []
    for prompt, completion in pairs:
        tokens = prompt + completion
        n, p = len(tokens) - 1, len(prompt) - 1
        sampled = np.zeros(n, np.float32)
        sampled[p:] = 1.0
        arrays: dict[str, np.ndarray] = {"target_tokens": np.asarray(tokens[1:], np.int64)}
        if loss_fn == "cross_entropy":
            arrays["weights"] = sampled
        else:
            arrays["logprobs"] = sampled * rng.uniform(-6.0, -4.0, n).astype(np.float32)
            arrays["advantages"] = sampled * rng.normal(size=n).astype(np.float32)
            arrays["sequence_ratio_mask" if loss_fn == "gspo" else "sampled_mask"] = sampled
        data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(tokens[:-1]),
                loss_fn_inputs={k: types.TensorData.from_numpy(v) for k, v in arrays.items()},
            )
        )
    return data


def one_graph(model: Any, data: list[types.Datum], loss_fn: str) -> tuple[float, float, list[Any]]:
    """Full logits per datum, one graph, loss.backward(): the reference. Also returns the sum of the
    per-token losses' magnitudes, the scale of fp32 rounding in a sum that cancels (dro, ppo)."""
    device = engine_device()
    total, magnitude, outputs = torch.zeros((), device=device), 0.0, []
    for d in data:
        tokens = torch.tensor([d.model_input.to_ints()], device=device)
        logits = model(input_ids=tokens, use_cache=False).logits.float()
        inputs = {
            k: torch.from_numpy(v.to_numpy())[None].to(device) for k, v in d.loss_fn_inputs.items()
        }
        targets = inputs.pop("target_tokens")
        lp = torch.log_softmax(logits, -1).gather(-1, targets[..., None])[..., 0]
        per_token = LOSSES[loss_fn](lp, inputs, {})
        total = total + per_token.sum()
        magnitude += float(per_token.detach().abs().sum())
        outputs.append(lp[0].detach().cpu().numpy())
    total.backward()
    return float(total.detach()), magnitude, outputs


@pytest.mark.parametrize("loss_fn", sorted(LOSSES))
def test_builtin_gradients_equal_one_graph(backend: Any, monkeypatch: Any, loss_fn: str) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=3)
    monkeypatch.setattr(logprobs, "LOGIT_CHUNK_TOKENS", 3)
    assert_builtin_equals_one_graph(client, rl_data(loss_fn), loss_fn, microbatch_tokens=12)


def assert_builtin_equals_one_graph(
    client: Any, data: list[types.Datum], loss_fn: str, microbatch_tokens: int
) -> None:
    """The engine's loss, logprobs and LoRA gradients equal `one_graph`'s (adapter randomised)."""
    generator = engine_generator(0)  # the same adapter whatever ran before
    with client.host.use(client.adapter) as model, torch.enable_grad():
        for p in adapter_parameters(model, client.adapter).values():  # B = 0 gives A no gradient
            p.data.normal_(0.0, 0.05, generator=generator)
        want_loss, magnitude, want_lp = one_graph(model, data, loss_fn)
        want = take_grads(client)
        out = run_builtin_loss(model, data, loss_fn, None, True, PassSettings(microbatch_tokens))
    # Summed in another order: dro's terms of ~6 cancel to ~0.05, so the rounding follows them.
    assert out.metrics["loss:sum"] == pytest.approx(want_loss, rel=1e-5, abs=1e-6 * magnitude)
    for o, w in zip(out.loss_fn_outputs, want_lp, strict=True):
        np.testing.assert_allclose(o["logprobs"].to_numpy(), w, atol=1e-5)
    assert_grads_close(take_grads(client), want)


def assert_grads_close(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got.keys() == want.keys() and got
    for key in want:  # fp32 sums in another order: 1e-4 of the tensor's largest entry
        scale = float(want[key].abs().max())
        torch.testing.assert_close(got[key], want[key], rtol=1e-4, atol=1e-4 * scale)
