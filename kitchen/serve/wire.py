"""The Tinker SDK 0.38.0 wire formats the server reads and writes, through the SDK's own compiled
protobuf messages (`tinker.proto.tinker_public_pb2`): the forward_backward request in, and the
ForwardBackwardOutput / SampleResponse results out. Everything else on the wire is JSON of the
SDK's pydantic request and response types.

Pure functions: no I/O, no server state.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any

import numpy as np
from tinker import types
from tinker.proto import tinker_public_pb2 as pb

from kitchen.serve.errors import UserError

PROTO_CONTENT_TYPE = "application/x-protobuf"

_DTYPE_IN: dict[int, tuple[str, Any]] = {
    pb.DTYPE_FLOAT32: ("float32", np.float32),
    pb.DTYPE_INT64: ("int64", np.int64),
    pb.DTYPE_INT32: ("int64", np.int32),
}
_STOP_REASON = {"stop": pb.STOP_REASON_STOP, "length": pb.STOP_REASON_LENGTH}
_MASK_LOGPROB = -99999.0  # the SDK's TopkLogprobs sentinel for an empty cell


class WireError(UserError):
    """A request body the server cannot decode; reported to the client as a user error."""


@dataclasses.dataclass(frozen=True)
class ForwardBackwardCall:
    """A decoded /api/v1/forward_backward request."""

    model_id: str
    seq_id: int
    loss_fn: str
    loss_fn_config: dict[str, float] | None
    forward_only: bool
    data: list[types.Datum]


# -- requests in ------------------------------------------------------------------------------


def decode_forward_backward(body: bytes) -> ForwardBackwardCall:
    """Parse the SDK's protobuf ForwardBackwardRequest into kitchen's (the SDK's) types."""
    msg = pb.ForwardBackwardRequest()
    try:
        msg.ParseFromString(body)
    except Exception as e:  # protobuf raises DecodeError, a bare Exception subclass
        raise WireError(
            f"forward_backward body is not a ForwardBackwardRequest protobuf: {e}"
        ) from e
    return ForwardBackwardCall(
        model_id=msg.model_id,
        seq_id=msg.seq_id,
        loss_fn=msg.loss_fn,
        loss_fn_config=_loss_config(msg),
        forward_only=msg.forward_only,
        data=[_datum(d, i) for i, d in enumerate(msg.data)],
    )


def _loss_config(msg: Any) -> dict[str, float] | None:
    # Newer SDKs write loss_fn_config_v2 and mirror numbers into the legacy map; prefer v2.
    if msg.loss_fn_config_v2:
        out: dict[str, float] = {}
        for key, value in msg.loss_fn_config_v2.items():
            if value.WhichOneof("value") != "number":
                raise WireError(f"loss_fn_config[{key!r}]: the local engine takes numbers only")
            out[key] = float(value.number)
        return out
    if msg.loss_fn_config:
        return {k: float(v) for k, v in msg.loss_fn_config.items()}
    return None


def _datum(msg: Any, index: int) -> types.Datum:
    chunks: list[types.ModelInputChunk] = []
    for c, chunk in enumerate(msg.model_input):
        kind = chunk.WhichOneof("chunk")
        if kind == "image":
            chunks.append(_image(chunk.image, f"datum {index}: chunk {c} (image)"))
            continue
        if kind != "encoded_text":
            raise WireError(
                f"datum {index}: {kind} chunks are not supported; send token or image chunks"
            )
        tokens = np.frombuffer(chunk.encoded_text.tokens, dtype=np.int32).tolist()
        chunks.append(types.EncodedTextChunk(tokens=tokens))
    inputs = {
        name: _tensor(t, f"datum {index} loss_fn_inputs[{name!r}]")
        for name, t in msg.loss_fn_inputs.items()
    }
    datum = types.Datum(model_input=types.ModelInput(chunks=chunks), loss_fn_inputs=inputs)
    if not (msg.model_input_spans or msg.loss_fn_input_spans):
        return datum
    return dataclasses.replace(
        datum,
        model_input_spans=[_span(x, index) for x in msg.model_input_spans],
        loss_fn_input_spans=[_span(x, index) for x in msg.loss_fn_input_spans],
    )


def _image(msg: Any, where: str) -> types.ImageChunk:
    """An image chunk as sent (the engine decodes and checks the image itself)."""
    if msg.format not in ("png", "jpeg"):
        raise WireError(f"{where}: image format {msg.format!r} is not png or jpeg")
    expected = msg.expected_tokens if msg.HasField("expected_tokens") else None
    return types.ImageChunk(data=msg.data, format=msg.format, expected_tokens=expected)


def _span(msg: Any, index: int) -> types.PromptProvenanceSpan | types.SampledProvenanceSpan:
    """A provenance span (which sampled sequence a run of positions reproduces)."""
    kind = msg.WhichOneof("span")
    cls = types.SampledProvenanceSpan if kind == "sampled_tokens" else types.PromptProvenanceSpan
    arm = getattr(msg, kind or "prompt_tokens")
    try:
        return cls(sequence_id=arm.sequence_id, offset=arm.offset, length=arm.length)
    except ValueError as e:
        raise WireError(f"datum {index}: provenance span: {e}") from e


def _tensor(msg: Any, where: str) -> types.TensorData:
    if msg.dtype not in _DTYPE_IN:
        raise WireError(f"{where}: unsupported dtype {msg.dtype}")
    dtype, np_dtype = _DTYPE_IN[msg.dtype]
    shape = list(msg.shape) or None
    if msg.HasField("sparse_csr"):
        csr = msg.sparse_csr
        return types.TensorData(
            data=np.frombuffer(csr.values, dtype=np_dtype),
            dtype=dtype,  # type: ignore[arg-type]
            shape=shape,
            sparse_crow_indices=np.frombuffer(csr.crow_indices, dtype=np.int64).tolist(),
            sparse_col_indices=np.frombuffer(csr.col_indices, dtype=np.int64).tolist(),
        )
    values = np.frombuffer(msg.dense, dtype=np_dtype)
    if shape is not None and math.prod(shape) != values.size:
        raise WireError(f"{where}: {values.size} values do not fill shape {shape}")
    return types.TensorData(data=values, dtype=dtype, shape=shape)  # type: ignore[arg-type]


# -- results out ------------------------------------------------------------------------------


def encode_forward_backward_output(out: types.ForwardBackwardOutput) -> bytes:
    """ForwardBackwardOutput as the SDK's proto: per-datum fields batched into ArrayRecords.

    One record holds a run of consecutive datums whose fields share names, dtypes and trailing
    shapes (ragged leading dims are fine: the offsets slice them), as the SDK decoder expects.
    """
    msg = pb.ForwardBackwardOutput(loss_fn_output_type=out.loss_fn_output_type)
    for key, value in out.metrics.items():
        msg.metrics[key] = float(value)
    run: list[dict[str, np.ndarray]] = []
    run_sig: tuple[Any, ...] | None = None
    for datum in out.loss_fn_outputs:
        arrays = {name: _wire_array(td) for name, td in datum.items()}
        sig = tuple(sorted((n, a.dtype.str, a.shape[1:]) for n, a in arrays.items()))
        if run and sig != run_sig:
            _append_record(msg, run)
            run = []
        run.append(arrays)
        run_sig = sig
    if run:
        _append_record(msg, run)
    return bytes(msg.SerializeToString())


def _wire_array(td: types.TensorData) -> np.ndarray:
    arr = td.to_numpy()
    if td.shape is not None and list(arr.shape) != td.shape:
        arr = arr.reshape(td.shape)
    wanted = np.int64 if td.dtype == "int64" else np.float32
    arr = np.ascontiguousarray(arr, dtype=wanted)
    return arr.reshape(1) if arr.ndim == 0 else arr


def _append_record(msg: Any, run: list[dict[str, np.ndarray]]) -> None:
    record = msg.loss_fn_outputs.add(num_datums=len(run))
    for name in run[0]:
        arrays = [datum[name] for datum in run]
        # Byte offsets of each datum's slice; plain Python: numpy's per-call cost dominates here.
        offsets = np.fromiter(itertools.accumulate((a.nbytes for a in arrays), initial=0), np.int64)
        field = record.fields[name]
        field.data = b"".join(a.tobytes() for a in arrays)
        field.offsets = offsets.tobytes()
        field.dtype = pb.DTYPE_INT64 if arrays[0].dtype == np.int64 else pb.DTYPE_FLOAT32
        field.trailing_shape.extend(arrays[0].shape[1:])


def encode_sample_response(response: types.SampleResponse) -> bytes:
    """SampleResponse as the SDK's proto. Sequence ids are not on the wire: the SDK stamps the
    ids the asample promise carried (`sample_sequence_ids`) onto the decoded sequences."""
    msg = pb.SampleResponse()
    for seq in response.sequences:
        item = msg.sequences.add(
            stop_reason=_STOP_REASON[seq.stop_reason],
            tokens=np.asarray(seq.tokens, dtype=np.int32).tobytes(),
        )
        if seq.logprobs is not None:
            item.logprobs = np.asarray(seq.logprobs, dtype=np.float32).tobytes()
        if seq.topk_logprobs is not None:
            _write_topk(item.topk_sampled_logprobs, seq.topk_logprobs)
    if response.prompt_logprobs_np is not None:
        msg.prompt_logprobs = np.asarray(response.prompt_logprobs_np, dtype=np.float32).tobytes()
    elif response.prompt_logprobs is not None:
        values = [np.nan if x is None else x for x in response.prompt_logprobs]
        msg.prompt_logprobs = np.asarray(values, dtype=np.float32).tobytes()
    topk = response.topk_prompt_logprobs
    if topk:
        _write_topk(msg.topk_prompt_logprobs, topk)
    if response.target_prompt_logprobs is not None:
        _write_tensor(msg.target_prompt_logprobs, response.target_prompt_logprobs)
    if response.prompt_alt_tokens is not None:
        _write_tensor(msg.prompt_alt_tokens.tokens, response.prompt_alt_tokens.tokens)
        _write_tensor(msg.prompt_alt_tokens.logprobs, response.prompt_alt_tokens.logprobs)
    return bytes(msg.SerializeToString())


def _write_tensor(msg: Any, td: types.TensorData) -> None:
    """A float32 or int64 TensorData as the proto Tensor, dense or sparse CSR as it is."""
    wide = np.int64 if td.dtype == "int64" else np.float32
    msg.dtype = pb.DTYPE_INT64 if td.dtype == "int64" else pb.DTYPE_FLOAT32
    msg.shape.extend(td.shape or [])
    values = np.asarray(td.data, dtype=wide).tobytes()
    if td.sparse_crow_indices is None or td.sparse_col_indices is None:
        msg.dense = values
        return
    msg.sparse_csr.values = values
    msg.sparse_csr.crow_indices = np.asarray(td.sparse_crow_indices, dtype=np.int64).tobytes()
    msg.sparse_csr.col_indices = np.asarray(td.sparse_col_indices, dtype=np.int64).tobytes()


def _write_topk(msg: Any, rows: list[list[tuple[int, float]] | None]) -> None:
    k = max((len(r) for r in rows if r), default=0)
    ids = np.zeros((len(rows), k), dtype=np.int32)
    logprobs = np.full((len(rows), k), _MASK_LOGPROB, dtype=np.float32)
    for i, row in enumerate(rows):
        for j, (token, lp) in enumerate(row or []):
            ids[i, j], logprobs[i, j] = token, lp
    msg.token_ids, msg.logprobs = ids.tobytes(), logprobs.tobytes()
    msg.k, msg.length = k, len(rows)


def forward_backward_output_json(out: types.ForwardBackwardOutput) -> dict[str, Any]:
    """The JSON shape of a ForwardBackwardOutput, for clients that do not ask for protobuf."""
    return {
        "loss_fn_output_type": out.loss_fn_output_type,
        "loss_fn_outputs": [
            {n: {"data": td.data, "dtype": td.dtype, "shape": td.shape} for n, td in d.items()}
            for d in out.loss_fn_outputs
        ],
        "metrics": dict(out.metrics),
    }


def sample_response_json(response: types.SampleResponse) -> dict[str, Any]:
    """The JSON shape of a SampleResponse, for clients that do not ask for protobuf."""
    return {
        "type": "sample",
        "sequences": [
            {"stop_reason": s.stop_reason, "tokens": s.tokens, "logprobs": s.logprobs}
            for s in response.sequences
        ],
        "prompt_logprobs": response.prompt_logprobs,
    }


def mask_prompt_logprobs(response: types.SampleResponse, last_n: int) -> types.SampleResponse:
    """Keep only the last `last_n` prompt logprobs (SampleRequest.prompt_logprobs_last_n)."""
    values = response.prompt_logprobs
    if values is None:
        return response
    masked = np.asarray([np.nan if x is None else x for x in values], dtype=np.float32)
    masked[: max(0, len(masked) - last_n)] = np.nan
    topk = response.topk_prompt_logprobs
    if topk is not None:
        topk = [None if i < len(topk) - last_n else row for i, row in enumerate(topk)]
    # The request's other answers (target logprobs, alternative tokens) stay as they are.
    return dataclasses.replace(
        response,
        prompt_logprobs_np=masked,
        _prompt_logprobs_list=None,
        topk_prompt_logprobs_np=None,
        _topk_prompt_logprobs_list=topk,
    )
