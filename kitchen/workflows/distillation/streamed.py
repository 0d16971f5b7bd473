"""Streamed training data: rows pulled from the dataset store's stream as training reaches them
(HFDatasetStore.stream: a hub dataset with streaming=True, a JSONL line by line), converted and
tokenized a batch at a time, so a dataset of millions of rows (OpenThoughts3) is never loaded
whole. Batch i is rows [i * batch_size, (i + 1) * batch_size) of the stream, in stream order
(or through the store's seeded shuffle buffer: a stream has no index to permute, and the same
seed gives the same order), so a resumed run skips to its step's rows."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kitchen.engine.errors import ConfigError, DataError
from kitchen.engine.stage import Context, Metrics
from kitchen.workflows.common.setup import RowConverter


@dataclass
class RowCursor:
    """A stream of (where, row) and how many rows were taken from it."""

    rows: Iterator[tuple[str, dict[str, Any]]]
    taken: int = 0

    def take(self, n: int) -> list[tuple[str, dict[str, Any]]]:
        out = list(itertools.islice(self.rows, n))
        self.taken += len(out)
        return out

    def skip_to(self, position: int) -> None:
        if position < self.taken:
            raise DataError(f"a stream cannot go back: at row {self.taken}, asked for {position}")
        self.take(position - self.taken)


@dataclass(frozen=True, kw_only=True)
class OpenRowStream:
    """The training rows of `source` as a stream (`row_stream`); `max_rows` of them make
    max_rows // batch_size steps (a stream has no length to count)."""

    source: str
    split: str = "train"
    max_rows: int
    batch_size: int
    shuffle_buffer: int = 0  # > 1: the store's shuffle buffer of that many rows, seeded by seed
    seed: int = 0
    name: str = "open_row_stream"
    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset({"row_stream", "n_batches", "total_steps"})
    ports: frozenset[str] = frozenset({"datasets"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        store = ctx.port("datasets")
        stream = getattr(store, "stream", None)
        if stream is None:
            raise ConfigError(f"dataset store {store.name!r} cannot stream rows; use the hf store")
        # a store that cannot shuffle is asked only for what it can do
        shuffle = {"shuffle_buffer": self.shuffle_buffer, "seed": self.seed}
        rows = stream(self.source, self.split, **(shuffle if self.shuffle_buffer > 1 else {}))
        ctx.state.row_stream = RowCursor(rows)
        ctx.state.n_batches = self.max_rows // self.batch_size
        ctx.state.total_steps = ctx.state.n_batches
        return None


@dataclass(frozen=True, kw_only=True)
class StreamedBatch:
    """This step's `batch_size` rows of the stream, converted (`convert(row, where)`; None drops
    a row and the next one is pulled) and rendered into cross-entropy datums (`batch`)."""

    batch_size: int
    convert: RowConverter
    max_length: int | None = None
    train_on_what: str | None = "all_assistant_messages"
    name: str = "streamed_batch"
    reads: frozenset[str] = frozenset({"row_stream", "renderer", "batch_idx"})
    writes: frozenset[str] = frozenset({"batch"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.supervised import conversation_to_datum

        cursor: RowCursor = ctx.state.row_stream
        cursor.skip_to(ctx.state.batch_idx * self.batch_size)  # a resumed run's first batch
        batch: list[Any] = []
        dropped = 0
        while len(batch) < self.batch_size:
            pulled = cursor.take(1)
            if not pulled:
                raise DataError(f"the stream ended after {cursor.taken} rows, before batch {ctx.state.batch_idx} was full")  # fmt: skip
            where, row = pulled[0]
            converted = self.convert(row, where)
            if converted is None:
                dropped += 1
                continue
            batch.append(conversation_to_datum(converted["messages"], ctx.state.renderer, self.max_length, self.train_on_what))  # fmt: skip
        ctx.state.batch = batch
        return {"stream/rows_read": cursor.taken, "stream/rows_dropped": dropped}


@dataclass(frozen=True, kw_only=True)
class TokenizeHeldOut:
    """The held-out conversations (loaded whole: a test split is small) as datums (`test_data`)."""

    max_length: int | None = None
    train_on_what: str | None = "all_assistant_messages"
    name: str = "tokenize_held_out"
    reads: frozenset[str] = frozenset({"test_conversations", "renderer"})
    writes: frozenset[str] = frozenset({"test_data"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.supervised import conversation_to_datum

        ctx.state.test_data = [
            conversation_to_datum(
                c["messages"], ctx.state.renderer, self.max_length, self.train_on_what
            )
            for c in ctx.state.test_conversations or []
        ]
        return None
