"""The messages between ranks are typed: one frozen dataclass per kind, each with its handler on the
worker side, and each whole after the pickling a broadcast does (no processes here)."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
from tinker import types

from kitchen.adapters.local.distributed import commands
from kitchen.adapters.local.distributed.worker import HANDLERS
from kitchen.adapters.local.sample.decode_batch import CacheRows, Join, Keep, Op, Prefill, Step


def kinds() -> set[type[commands.Command]]:
    """The kinds of message: the leaves of Command's tree (the classes between, ClientCall and the
    like, are fields that several kinds share, never sent alone)."""
    return {
        k
        for k in vars(commands).values()
        if isinstance(k, type) and issubclass(k, commands.Command) and not k.__subclasses__()
    }


def test_every_command_but_stop_has_its_handler_and_no_handler_is_for_nothing():
    assert len(kinds()) >= 12
    assert set(HANDLERS) == kinds() - {commands.Stop}


def test_commands_and_decode_ops_are_frozen_dataclasses():
    for kind in [*kinds(), Prefill, Join, Step, Keep]:
        assert dataclasses.is_dataclass(kind), kind
        assert kind.__dataclass_params__.frozen, kind  # type: ignore[attr-defined]


def test_a_command_arrives_whole_after_pickling():
    data = [
        types.Datum(
            model_input=types.ModelInput.from_ints([1, 2, 3]),
            loss_fn_inputs={"target_tokens": [2, 3, 4], "weights": [1.0, 1.0, 0.0]},
        )
    ]
    sent = commands.RunLoss("local-train-1", data, "cross_entropy", {"clip": 0.2}, True)
    got = pickle.loads(pickle.dumps(sent))
    assert dataclasses.replace(got, data=[]) == dataclasses.replace(sent, data=[])
    (datum,) = got.data
    assert datum.model_input.to_ints() == [1, 2, 3]
    assert datum.loss_fn_inputs["weights"].tolist() == [1.0, 1.0, 0.0]
    step = commands.OptimStep("local-train-1", types.AdamParams(learning_rate=1e-3))
    assert pickle.loads(pickle.dumps(step)) == step


def test_cache_rows_run_ops_by_type():
    # Without a model the ops only drop rows: a Keep of none empties the cache.
    rows = CacheRows()
    rows.cache = object()
    ops: list[Op] = [Keep([], 0)]
    assert rows.run(None, ops) is None
    assert rows.cache is None
    ids = np.zeros((1, 1), dtype=np.int64)
    assert Step(ids, None, ids).mask_NL is None
