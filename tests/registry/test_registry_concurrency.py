"""Two processes registering the same name at once get distinct, gap-free versions."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

from kitchen.adapters.model_registry import SQLiteRegistry
from tests.registry.drafts import make_draft

PER_PROCESS = 20


def _register_many(path: str, worker: str, start: Any, results: Any) -> None:
    registry = SQLiteRegistry(path, timeout=30)
    start.wait(30)
    versions = [
        registry.register(make_draft("shared", log_dir=f"/runs/{worker}/{i}")).version
        for i in range(PER_PROCESS)
    ]
    results.put((worker, versions))


def test_concurrent_registrations_get_distinct_gap_free_versions(tmp_path: Path) -> None:
    path = str(tmp_path / "registry.db")
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(2), ctx.Queue()
    workers = [ctx.Process(target=_register_many, args=(path, w, start, results)) for w in "AB"]
    for w in workers:
        w.start()
    by_worker = dict(results.get(timeout=120) for _ in workers)
    for w in workers:
        w.join(30)
        assert w.exitcode == 0
    all_versions = by_worker["A"] + by_worker["B"]
    assert sorted(all_versions) == list(range(1, 2 * PER_PROCESS + 1))
    assert all(v == sorted(v) for v in by_worker.values())
    records = SQLiteRegistry(path).list("shared")
    assert [r.version for r in records] == list(range(1, 2 * PER_PROCESS + 1))
    # Each stored record is the one its worker registered under that version.
    owner = {v: w for w, vs in by_worker.items() for v in vs}
    assert all(
        r.log_dir is not None and r.log_dir.split("/")[2] == owner[r.version] for r in records
    )
