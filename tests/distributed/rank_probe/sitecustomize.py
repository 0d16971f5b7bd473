"""Python's site hook imports this module at the start of every process whose path begins with
this folder. In rank 0 of a run started with KITCHEN_TEST_RANK_PROBE=FILE, it appends to FILE, in
order, each address's records as the agent gateway hands them to the RL seam ("take") and each
batch of datums forward_backward receives ("forward_backward"), pickled: rank 0 is a process of
its own, which a test's monkeypatch cannot reach. Other processes it leaves alone."""

from __future__ import annotations

import os
import pickle
import threading
from typing import Any


def _install(path: str) -> None:
    from kitchen.adapters.local.clients.training_client import LocalTrainingClient
    from kitchen.serve.gateway.gateway import Gateway

    lock = threading.Lock()  # the gateway takes from its HTTP server's threads

    def keep(kind: str, value: Any) -> None:
        with lock, open(path, "ab") as f:
            pickle.dump((kind, value), f)

    take = Gateway.take
    forward_backward = LocalTrainingClient.forward_backward

    def recording_take(self: Any, address: str) -> Any:
        records = take(self, address)
        keep("take", (address, records))
        return records

    def recording_forward_backward(self: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        keep("forward_backward", list(data))
        return forward_backward(self, data, *args, **kwargs)

    Gateway.take = recording_take  # type: ignore[method-assign]
    LocalTrainingClient.forward_backward = recording_forward_backward  # type: ignore[method-assign]


if os.environ.get("KITCHEN_TEST_RANK_PROBE") and os.environ.get("RANK") == "0":
    _install(os.environ["KITCHEN_TEST_RANK_PROBE"])
