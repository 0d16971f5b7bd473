"""Rows that share a prefix (an RL group's samples of one prompt) run it through the decoder once:
logprobs and gradients still equal one graph over every row's full logits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from tinker import types

from kitchen.adapters.local.model.lora import adapter_parameters
from kitchen.adapters.local.train import batching
from kitchen.adapters.local.train.forward import run_custom_loss
from kitchen.adapters.local.train.pass_settings import PassSettings
from tests.helpers import engine_generator

from .conftest import TINY, take_grads
from .test_builtin_grads import assert_builtin_equals_one_graph, assert_grads_close, rl_data

WEIGHTS = batching.LossInputs(("weights",))  # a loss reading per-token weights
CPU = batching.BatchTarget("cpu")
PROMPT = list(range(30, 50))  # 20 tokens: above MIN_SHARED_PREFIX
GROUPS = [
    (PROMPT, [[123, 44, 9], [300, 2, 71, 5, 6], [12, 13]]),
    ([*PROMPT[:17], 7, 7, 7], [[1, 2], [3, 4, 5]]),  # shares 17 tokens with the first prompt
    ([5, 17, 42], [[99, 98]]),  # nothing shared
]


# Groups that share nothing with each other, in one micro-batch: prefixes of 20, 18 and 19 tokens
# (the last row keeps one token of its own) left-padded in one pass, or all of 20 tokens, unpadded.
SEVERAL = {
    "padded": [
        (PROMPT, [[123, 44, 9], [300, 2, 71, 5, 6], [12, 13]]),
        (list(range(200, 218)), [[1, 2], [3, 4, 5, 6, 7, 8]]),
        (list(range(400, 420)), [[9], [10, 11]]),
    ],
    "equal": [
        (PROMPT, [[123, 44, 9], [300, 2, 71, 5, 6], [12, 13]]),
        (list(range(400, 420)), [[9, 8], [10, 11, 12, 13]]),
    ],
}


def group_data(loss_fn: str, groups: Any = GROUPS) -> list[types.Datum]:
    return rl_data(loss_fn, [(prompt, c) for prompt, cs in groups for c in cs], seed=1)


def test_groups_take_rows_that_share_a_prefix_when_it_saves_tokens() -> None:
    tokens_N = [d.model_input.to_ints() for d in group_data("cross_entropy")]
    groups = batching.prefix_groups(tokens_N, max_tokens=512)
    assert sorted(sorted(rows) for rows, _ in groups) == [[0, 1, 2, 3, 4]]
    assert groups[0][1] == 17  # the two prompts' common part
    assert batching.prefix_groups(tokens_N, max_tokens=40) != groups  # the budget splits them
    assert not batching.prefix_groups([[1] * 40, [1] * 20 + [2] * 100], 512)  # padding costs more


@pytest.mark.parametrize("loss_fn", ["cross_entropy", "importance_sampling", "ppo"])
@pytest.mark.parametrize("groups", ["one", "padded", "equal"])
def test_shared_prefix_gradients_equal_one_graph(backend: Any, loss_fn: str, groups: str) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=5)
    data = group_data(loss_fn, SEVERAL.get(groups, GROUPS))
    assert_builtin_equals_one_graph(client, data, loss_fn, microbatch_tokens=512)


def test_several_groups_share_one_micro_batch_within_the_budget() -> None:
    data = group_data("cross_entropy", SEVERAL["padded"])
    plan = batching.plan_microbatches(data, WEIGHTS, 512, CPU)
    assert [sorted(len(rows) for rows, _ in mb.shared) for mb in plan] == [[2, 2, 3]]
    assert sorted(prefix for _, prefix in plan[0].shared) == [18, 19, 20]
    split = batching.plan_microbatches(data, WEIGHTS, 60, CPU)
    assert len(split) > 1 and all(mb.shared for mb in split)  # the budget splits the groups


def test_shared_prefix_custom_loss_equals_unshared(backend: Any, monkeypatch: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=6)
    data = group_data("cross_entropy")
    # On the host, as the logprobs a custom loss gets (the Tinker SDK hands it CPU tensors).
    weights = [torch.linspace(-1.0, 1.0, len(d.model_input.to_ints()), device="cpu") for d in data]

    def loss(_: list[types.Datum], lps: list[torch.Tensor]) -> tuple[Any, dict[str, float]]:
        return sum((w * lp).sum() for w, lp in zip(weights, lps, strict=True)), {}

    results, generator = [], engine_generator(0)
    for min_shared in (batching.MIN_SHARED_PREFIX, 10**9):  # shared, then never shared
        monkeypatch.setattr(batching, "MIN_SHARED_PREFIX", min_shared)
        with client.host.use(client.adapter) as model, torch.enable_grad():
            if not results:
                for p in adapter_parameters(model, client.adapter).values():
                    p.data.normal_(0.0, 0.05, generator=generator)
            out = run_custom_loss(model, data, loss, PassSettings(512))
        results.append((out, take_grads(client)))
    (shared, shared_grads), (plain, plain_grads) = results
    for a, b in zip(shared.loss_fn_outputs, plain.loss_fn_outputs, strict=True):
        np.testing.assert_allclose(a["logprobs"].to_numpy(), b["logprobs"].to_numpy(), atol=1e-5)
    assert_grads_close(shared_grads, plain_grads)


def test_prompts_sharing_a_header_form_a_group_each() -> None:
    """RL-shaped rows (a 30-token few-shot header, a 7-token question, 8 samples of 6 tokens): a
    group per prompt (4 x 37 + 32 x 5 tokens through the decoder) beats one group on the header
    (30 + 32 x 12)."""
    header = list(range(100, 130))
    prompts = [[*header, *range(q, q + 7)] for q in (200, 300, 400, 500)]
    tokens_N = [
        [*p, *range(1000 + 10 * s, 1000 + 10 * s + 6)][:-1] for p in prompts for s in range(8)
    ]
    groups = batching.prefix_groups(tokens_N, max_tokens=512)
    assert sorted(sorted(rows) for rows, _ in groups) == [
        list(range(8 * g, 8 * g + 8)) for g in range(4)
    ]
    assert {prefix for _, prefix in groups} == {37}
