"""The server's wire codec against the SDK's own encoders and decoders (no server, no torch), and
the tinker:// path mapping."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tinker import types
from tinker.proto.request_conv import forward_backward_request_to_proto
from tinker.proto.response_conv import (
    deserialize_forward_backward_output,
    deserialize_sample_response,
)

from kitchen.serve import paths, wire
from kitchen.serve.errors import UserError


def _request(data: list[types.Datum], loss_fn_config: dict[str, float] | None = None) -> bytes:
    request = types.ForwardBackwardRequest(
        forward_backward_input=types.ForwardBackwardInput(
            data=data, loss_fn="importance_sampling", loss_fn_config=loss_fn_config
        ),
        model_id="s:train:0",
        seq_id=7,
    )
    msg = forward_backward_request_to_proto(request)
    msg.forward_only = True
    return bytes(msg.SerializeToString())


def test_forward_backward_request_decodes_what_the_sdk_encodes() -> None:
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([5, 6, 7]),
        loss_fn_inputs={
            "target_tokens": np.array([6, 7, 8]),
            "logprobs": np.array([-1.0, -2.0, -0.5], dtype=np.float32),
            "advantages": np.array([0.0, 1.0, -1.0], dtype=np.float32),
        },
    )
    call = wire.decode_forward_backward(_request([datum, datum], {"clip_low_threshold": 0.8}))
    assert (call.model_id, call.seq_id, call.loss_fn, call.forward_only) == (
        "s:train:0",
        7,
        "importance_sampling",
        True,
    )
    assert call.loss_fn_config == {"clip_low_threshold": pytest.approx(0.8)}
    assert len(call.data) == 2 and call.data[1].model_input.to_ints() == [5, 6, 7]
    inputs = call.data[0].loss_fn_inputs
    assert inputs["target_tokens"].dtype == "int64" and inputs[
        "target_tokens"
    ].to_numpy().tolist() == [6, 7, 8]
    assert inputs["advantages"].to_numpy().tolist() == [0.0, 1.0, -1.0]


def test_garbage_body_is_a_user_error() -> None:
    with pytest.raises(UserError, match="ForwardBackwardRequest"):
        wire.decode_forward_backward(b"\xff\xff\xff not a protobuf")


def test_ragged_and_2d_outputs_survive_the_sdk_decoder() -> None:
    outputs = [
        {"logprobs": types.TensorData.from_numpy(np.array([-1.0, -2.0], dtype=np.float32))},
        {"logprobs": types.TensorData.from_numpy(np.array([-3.0], dtype=np.float32))},
        {"logprobs": types.TensorData.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))},
    ]
    out = types.ForwardBackwardOutput("ArrayRecord", outputs, {"loss:sum": 6.0})
    back = deserialize_forward_backward_output(wire.encode_forward_backward_output(out))
    assert back.metrics == {"loss:sum": 6.0} and back.loss_fn_output_type == "ArrayRecord"
    got = [o["logprobs"].to_numpy() for o in back.loss_fn_outputs]
    assert [g.tolist() for g in got] == [[-1.0, -2.0], [-3.0], [[0, 1, 2], [3, 4, 5]]]


def test_sample_response_survives_the_sdk_decoder() -> None:
    response = types.SampleResponse(
        sequences=[
            types.SampledSequence(
                stop_reason="length",
                sequence_id="x",
                tokens_np=np.array([4, 2], dtype=np.int32),
                logprobs_np=np.array([-0.5, -1.5], dtype=np.float32),
            )
        ],
        prompt_logprobs_np=np.array([np.nan, -2.0, -3.0], dtype=np.float32),
        _topk_prompt_logprobs_list=[None, [(9, -0.1), (8, -2.5)], [(7, -0.2)]],
    )
    back = deserialize_sample_response(wire.encode_sample_response(response))
    seq = back.sequences[0]
    assert (seq.stop_reason, seq.tokens, seq.logprobs) == ("length", [4, 2], [-0.5, -1.5])
    assert back.prompt_logprobs == [None, -2.0, -3.0]
    assert back.topk_prompt_logprobs == [
        None,
        [(9, pytest.approx(-0.1)), (8, -2.5)],
        [(7, pytest.approx(-0.2))],
    ]
    masked = wire.mask_prompt_logprobs(response, last_n=1)
    assert masked.prompt_logprobs == [None, None, -3.0]


def test_tinker_paths_map_to_one_folder_each_and_reject_traversal(tmp_path: Path) -> None:
    ref = paths.parse_tinker_path("tinker://kitchen-ab:train:0/weights/000002")
    assert (ref.run_id, ref.kind, ref.name) == ("kitchen-ab:train:0", "state", "000002")
    assert ref.tinker_path == "tinker://kitchen-ab:train:0/weights/000002"
    assert ref.folder(tmp_path) == tmp_path / "weights" / "kitchen-ab.train.0--000002"
    other = paths.parse_tinker_path("tinker://kitchen-ab:train:1/sampler_weights/000002")
    assert other.folder(tmp_path) != ref.folder(tmp_path)
    for bad in (
        "tinker://run/weights/../x",
        "tinker://run/weights/..",
        "tinker://run/other/x",
        "/etc/passwd",
    ):
        with pytest.raises(UserError):
            paths.parse_tinker_path(bad)
    with pytest.raises(UserError, match="does not exist"):
        paths.resolve_checkpoint("tinker://run/weights/missing", tmp_path)
