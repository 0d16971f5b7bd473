import logging

import pytest
from tinker import types

from train_core.preference import (
    Comparison,
    LabeledComparison,
    build_dpo_data,
    chosen_rejected,
)
from train_core.supervised import datum_weights


def _labeled(label, a="good", b="bad", prompt="q?"):
    return LabeledComparison(
        Comparison(
            prompt_conversation=[{"role": "user", "content": prompt}],
            completion_A=[{"role": "assistant", "content": a}],
            completion_B=[{"role": "assistant", "content": b}],
        ),
        label,
    )


def _completion_text(datum, tokenizer):
    targets = datum.loss_fn_inputs["target_tokens"].data
    weights = datum_weights(datum)
    return tokenizer.decode(
        [int(t) for t, w in zip(targets, weights, strict=True) if w > 0 and t >= 10]
    )


def test_pairs_are_interleaved_chosen_then_rejected_for_either_label(renderer):
    data, stats = build_dpo_data([_labeled("A"), _labeled("B")], renderer, max_length=None)
    texts = [_completion_text(d, renderer.tokenizer) for d in data]
    assert texts == ["good", "bad", "bad", "good"]
    assert stats.num_pairs == 2 and stats.dropped == {}
    # DPO compares token-sum logprobs: weights are not mean-reduced
    assert set(datum_weights(data[0]).tolist()) == {0.0, 1.0}
    chosen, rejected = chosen_rejected(data)
    assert [_completion_text(d, renderer.tokenizer) for d in chosen] == ["good", "bad"]
    assert [_completion_text(d, renderer.tokenizer) for d in rejected] == ["bad", "good"]


def test_ties_are_dropped_and_counted(renderer):
    data, stats = build_dpo_data([_labeled("Tie"), _labeled("A")], renderer, max_length=None)
    assert len(data) == 2 and stats.num_pairs == 1 and stats.dropped == {"tie": 1}
    assert stats.metrics()["data/dropped_tie"] == 1.0


def test_long_pairs_are_truncated_to_max_length_on_both_sides(renderer):
    long_pair = _labeled("A", a="x" * 40, b="y" * 30)
    data, stats = build_dpo_data([long_pair], renderer, max_length=16)
    assert stats.num_pairs == 1 and stats.num_truncated == 1
    for datum in data:
        assert datum.model_input.length == 15  # max_length tokens -> max_length - 1 inputs
        assert datum_weights(datum).sum() > 0
    assert _completion_text(data[0], renderer.tokenizer).startswith("xxx")


def test_a_prompt_longer_than_max_length_drops_the_pair_instead_of_crashing(renderer, caplog):
    too_long = _labeled("A", prompt="p" * 50)
    with caplog.at_level(logging.WARNING):
        data, stats = build_dpo_data([too_long, _labeled("B")], renderer, max_length=20)
    assert stats.num_pairs == 1 and stats.dropped == {"no_completion_tokens": 1}
    assert len(data) == 2
    assert "dropped" in caplog.text


def test_overflow_drop_policy_drops_any_pair_that_does_not_fit(renderer):
    _, stats = build_dpo_data(
        [_labeled("A", a="x" * 40), _labeled("A")], renderer, max_length=16, overflow="drop"
    )
    assert stats.num_pairs == 1 and stats.dropped == {"overflow": 1}


def test_the_split_keeps_pairs_and_refuses_an_odd_batch():
    data = [types.Datum(model_input=types.ModelInput.from_ints([i])) for i in range(5)]
    chosen, rejected = chosen_rejected(data[:4])
    assert [d.model_input.to_ints() for d in chosen] == [[0], [2]]
    assert [d.model_input.to_ints() for d in rejected] == [[1], [3]]
    with pytest.raises(ValueError, match="5 datums; expected interleaved"):
        chosen_rejected(data)


def test_labeled_comparison_swap_and_label_validation():
    swapped = _labeled("A").swap()
    assert swapped.label == "B"
    assert swapped.comparison.completion_A[0]["content"] == "bad"
    assert _labeled("Tie").swap().label == "Tie"
    with pytest.raises(ValueError, match="expected one of A, B, Tie"):
        _labeled("C")
