"""The sampler's stability records, kept per sequence id, and the stable_reinforce inputs read from
them through a Datum's provenance spans (`Datum.with_provenance`, tinker SDK 0.38.0).

A sample request made with `record_stability_info` leaves one record per sampled sequence: its
prompt, its tokens and the logprob the sampler drew each token with (log_softmax(z / T), see
sampling.py). A stable_reinforce datum names, through `loss_fn_input_spans`, which recorded sequence
(and which offset of its prompt or sample) each target position reproduces; the loss then uses the
recorded sampler logprobs, not numbers the client sends, and only on sampled positions. A span whose
tokens differ from the record is refused: it would train on a distribution nobody sampled from.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from tinker import types

from kitchen.engine.errors import BackendError

SAMPLED_MASK = "sampled_mask"  # the per-position input stable_reinforce reads besides the SDK's


@dataclass(frozen=True)
class SequenceRecord:
    prompt: tuple[int, ...]
    tokens: tuple[int, ...]
    logprobs: np.ndarray  # float32, one per sampled token


class StabilityRecords:
    """sequence id -> record; the least recently used go first beyond `capacity` sequences."""

    def __init__(self, capacity: int = 1 << 16) -> None:
        self._records: OrderedDict[str, SequenceRecord] = OrderedDict()
        self._lock = threading.Lock()
        self._capacity = capacity

    def put(self, sequence_id: str, record: SequenceRecord) -> None:
        with self._lock:
            self._records[sequence_id] = record
            while len(self._records) > self._capacity:
                self._records.popitem(last=False)

    def get(self, sequence_id: str) -> SequenceRecord | None:
        with self._lock:
            record = self._records.get(sequence_id)
            if record is not None:  # training on a sequence renews it, as the service does
                self._records.move_to_end(sequence_id)
            return record

    def drop(self, prefix: str) -> None:
        """Forget the sequences whose ids start with `prefix` (a finished session's)."""
        with self._lock:
            for sequence_id in [s for s in self._records if s.startswith(prefix)]:
                del self._records[sequence_id]

    def __len__(self) -> int:
        return len(self._records)


def with_sampler_logprobs(
    data: Sequence[types.Datum], records: StabilityRecords
) -> list[types.Datum]:
    """Each datum with `logprobs` taken from the records and `sampled_mask` = 1 on the positions a
    SampledProvenanceSpan covers; a clear error for a datum whose provenance the records refute."""
    return [_one(datum, i, records) for i, datum in enumerate(data)]


def _one(datum: types.Datum, index: int, records: StabilityRecords) -> types.Datum:
    spans = datum.loss_fn_input_spans
    if spans is None:
        raise BackendError(
            f"datum {index}: stable_reinforce needs provenance (Datum.with_provenance) naming the "
            "sampled sequence behind each position; sample with record_stability_info=True"
        )
    target = datum.loss_fn_inputs.get("target_tokens")
    if target is None:
        raise BackendError(f"datum {index}: loss_fn_inputs has no 'target_tokens'")
    targets = np.asarray(target.to_numpy()).reshape(-1)
    n = targets.shape[0]
    sampler_lp = np.zeros(n, np.float32)
    sampled = np.zeros(n, np.float32)
    start = 0
    for span in spans:
        record = records.get(span.sequence_id)
        if record is None:
            raise BackendError(
                f"datum {index}: sequence {span.sequence_id!r} has no stability record here; "
                "sample it with record_stability_info=True, in this session"
            )
        is_sampled = isinstance(span, types.SampledProvenanceSpan)
        source = record.tokens if is_sampled else record.prompt
        end, stop = start + span.length, span.offset + span.length
        if end > n or stop > len(source):
            raise BackendError(
                f"datum {index}: provenance span [{start}, {end}) of sequence {span.sequence_id!r} "
                f"reaches past the datum ({n}) or the recorded {'sample' if is_sampled else 'prompt'} ({len(source)})"
            )
        if list(targets[start:end]) != list(source[span.offset : stop]):
            raise BackendError(
                f"datum {index}: target_tokens[{start}:{end}] differ from the tokens sequence "
                f"{span.sequence_id!r} recorded at offset {span.offset}"
            )
        if is_sampled:
            sampler_lp[start:end] = record.logprobs[span.offset : stop]
            sampled[start:end] = 1.0
        start = end
    if start != n:
        raise BackendError(
            f"datum {index}: provenance spans cover {start} of {n} target positions; they must tile them"
        )
    inputs = {
        **datum.loss_fn_inputs,
        "logprobs": types.TensorData.from_numpy(sampler_lp),
        SAMPLED_MASK: types.TensorData.from_numpy(sampled),
    }
    return types.Datum(model_input=datum.model_input, loss_fn_inputs=inputs)
