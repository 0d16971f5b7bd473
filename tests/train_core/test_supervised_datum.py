import numpy as np
import pytest
from tinker import types

from train_core.scoring import full_sequence, target_logprobs
from train_core.supervised import (
    conversation_to_datum,
    datum_from_model_input_weights,
    datum_weights,
)


def _targets(datum: types.Datum) -> list[int]:
    return [int(t) for t in datum.loss_fn_inputs["target_tokens"].data]


def test_inputs_are_right_shifted_targets_left_shifted_weights_follow_targets():
    datum = datum_from_model_input_weights(
        types.ModelInput.from_ints([11, 12, 13, 14, 15]), np.array([0, 0, 1, 1, 0.5])
    )
    assert datum.model_input.to_ints() == [11, 12, 13, 14]
    assert _targets(datum) == [12, 13, 14, 15]
    assert datum_weights(datum).tolist() == [0, 1, 1, 0.5]
    assert datum.loss_fn_inputs["weights"].dtype == "float32"
    assert datum.loss_fn_inputs["target_tokens"].dtype == "int64"


def test_truncation_keeps_the_first_max_length_tokens_before_the_shift():
    datum = datum_from_model_input_weights(
        types.ModelInput.from_ints([11, 12, 13, 14, 15, 16]), [0, 1, 2, 3, 4, 5], max_length=4
    )
    assert datum.model_input.to_ints() == [11, 12, 13]
    assert _targets(datum) == [12, 13, 14]
    assert datum_weights(datum).tolist() == [1, 2, 3]


def test_truncation_across_chunks_cuts_the_last_text_chunk_partially():
    model_input = types.ModelInput(
        chunks=[
            types.EncodedTextChunk(tokens=[1, 2, 3]),
            types.EncodedTextChunk(tokens=[4, 5]),
            types.EncodedTextChunk(tokens=[6, 7]),
        ]
    )
    datum = datum_from_model_input_weights(model_input, np.arange(7), max_length=4)
    assert datum.model_input.to_ints() == [1, 2, 3]
    assert _targets(datum) == [2, 3, 4]
    assert datum_weights(datum).tolist() == [1, 2, 3]


def test_an_image_is_dropped_whole_and_never_left_trailing():
    image = types.ImageChunk(data=b"x", format="png", expected_tokens=3)
    model_input = types.ModelInput(
        chunks=[types.EncodedTextChunk(tokens=[1, 2]), image, types.EncodedTextChunk(tokens=[7, 8])]
    )
    datum = datum_from_model_input_weights(model_input, np.ones(7), max_length=6)
    # [7, 8] overflows by 1 -> cut to [7]; the image stays because text follows it.
    assert _targets(datum) == [2, 0, 0, 0, 7]
    datum = datum_from_model_input_weights(model_input, np.ones(7), max_length=5)
    # [7, 8] goes, then the trailing image goes: only [1, 2] is left.
    assert datum.model_input.to_ints() == [1]
    assert _targets(datum) == [2]


def test_mean_reduction_makes_weights_sum_to_one():
    datum = datum_from_model_input_weights(
        types.ModelInput.from_ints([1, 2, 3, 4]), [0, 1, 1, 2], reduction="mean"
    )
    assert datum_weights(datum).tolist() == pytest.approx([0.25, 0.25, 0.5])


@pytest.mark.parametrize(
    ("tokens", "weights", "message"),
    [([1, 2, 3], [1, 1], "expected one weight per token"), ([1], [1], "at least 2 tokens")],
)
def test_bad_inputs_fail_with_a_clear_message(tokens, weights, message):
    with pytest.raises(ValueError, match=message):
        datum_from_model_input_weights(types.ModelInput.from_ints(tokens), weights)


def test_conversation_to_datum_trains_on_all_assistant_messages_by_default(renderer):
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "yo"},
        {"role": "user", "content": "ok"},
        {"role": "assistant", "content": "k"},
    ]
    datum = conversation_to_datum(messages, renderer, max_length=None, reduction="none")
    assert renderer.calls == ["all_assistant_messages"]
    weighted = [t for t, w in zip(_targets(datum), datum_weights(datum), strict=True) if w > 0]
    assert renderer.tokenizer.decode(weighted) == "yo<4>k<4>"
    mean_datum = conversation_to_datum(messages, renderer, max_length=None)
    assert float(datum_weights(mean_datum).sum()) == pytest.approx(1.0)


def test_full_sequence_and_logprob_alignment_round_trip():
    datum = datum_from_model_input_weights(types.ModelInput.from_ints([5, 6, 7]), [0, 1, 1])
    assert full_sequence(datum).to_ints() == [5, 6, 7]
    aligned = target_logprobs([None, -0.5, -1.5])
    assert aligned.tolist() == [-0.5, -1.5]
    assert aligned.shape == datum_weights(datum).shape
