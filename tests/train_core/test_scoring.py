"""A datum's target logprobs from a sampling client: its full sequence scored, position 0 dropped,
every request submitted before any is awaited."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from tinker import types

from train_core.scoring import (
    forward_target_logprobs,
    full_sequence,
    score_full_sequences,
    target_logprobs,
)


def datum(inputs: list[int], targets: list[int]) -> types.Datum:
    return types.Datum(
        model_input=types.ModelInput.from_ints(inputs),
        loss_fn_inputs={"target_tokens": types.TensorData.from_numpy(np.asarray(targets))},
    )


class RecordingSampler:
    """Scores position i at -i; records submissions and awaits in order."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def compute_logprobs(self, prompt: types.ModelInput):
        tokens = prompt.to_ints()
        self.events.append(f"submit {tokens}")
        events = self.events

        async def result():
            events.append(f"await {tokens}")
            return [None, *(-float(i) for i in range(1, len(tokens)))]

        return result()


def test_each_datum_is_scored_on_its_full_sequence_and_aligned_with_its_targets():
    sampler = RecordingSampler()
    data = [datum([1, 2, 3], [2, 3, 4]), datum([7], [8])]
    logprobs_D = asyncio.run(score_full_sequences(sampler, data))
    assert [lp.tolist() for lp in logprobs_D] == [[-1.0, -2.0, -3.0], [-1.0]]
    assert sampler.events == [
        "submit [1, 2, 3, 4]",
        "submit [7, 8]",
        "await [1, 2, 3, 4]",
        "await [7, 8]",
    ]


def test_a_score_of_the_wrong_length_names_both_lengths():
    with pytest.raises(ValueError, match="scored 3 positions for a datum with 3 targets"):
        target_logprobs([None, -1.0, -2.0], 3)


def test_a_datum_without_targets_is_its_inputs():
    assert full_sequence(datum([5, 6], [])).to_ints() == [5, 6]


@pytest.mark.parametrize("returns", ["coroutine", "concurrent_future", "value"])
def test_a_training_clients_forward_is_read_whatever_kind_of_result_it_returns(returns):
    from concurrent.futures import Future

    output = types.ForwardBackwardOutput(
        loss_fn_output_type="ArrayRecord",
        loss_fn_outputs=[{"logprobs": types.TensorData.from_numpy(np.asarray([-0.5, -1.5]))}],
        metrics={},
    )

    class Trainer:
        def forward(self, data, loss_fn):
            assert loss_fn == "cross_entropy"
            if returns == "value":
                return output
            if returns == "concurrent_future":
                future: Future = Future()
                future.set_result(output)
                return future

            async def later():
                return output

            return later()

    (logprobs_T,) = asyncio.run(forward_target_logprobs(Trainer(), [datum([1, 2], [2, 3])]))
    assert logprobs_T.tolist() == [-0.5, -1.5]
