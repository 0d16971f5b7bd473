"""`kitchen serve` under load: 8 SDK clients train and sample at once (bench/serve_load.py's
workload, a few steps each); no request fails and each client's losses equal its solo run."""

from __future__ import annotations

import importlib.util
import sys
from functools import partial
from pathlib import Path
from types import ModuleType

import pytest

from tests.serve_hardening.conftest import KEY, Server

pytestmark = pytest.mark.slow
CLIENTS, STEPS = 8, 3


def _bench() -> ModuleType:
    name = "serve_load_bench"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[2] / "bench" / "serve_load.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        sys.modules[name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_eight_clients_at_once_fail_nothing_and_each_equals_its_solo_run(server: Server) -> None:
    bench = _bench()
    loaded = bench.concurrently(
        CLIENTS, partial(bench.client_workload, server.url, steps=STEPS, api_key=KEY)
    )
    solo = [bench.client_workload(server.url, i, steps=STEPS, api_key=KEY) for i in range(CLIENTS)]
    errors = [e for r in [*loaded, *solo] for e in r.errors]
    assert not errors, errors
    for i in range(CLIENTS):
        assert loaded[i].losses == solo[i].losses, f"client {i}"
    assert len({tuple(r.losses) for r in solo}) == CLIENTS  # each client trained on its own data
    requests = sum(len(r.latencies) for r in loaded)
    print(f"\nload: {CLIENTS} clients, {requests} requests, 0 failed, losses equal to solo")
