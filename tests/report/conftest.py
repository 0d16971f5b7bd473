"""Real run directories for the report tests, written in-process by the fake backend."""

from __future__ import annotations

from pathlib import Path

import pytest

import kitchen
from tests.rl_workflow.helpers import fake_backend


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    out = {name: root / name for name in ("sl", "sl_fast", "rl", "dpo")}
    kitchen.run("sl_basic", {"no_register": True}, backend="fake", log_dir=out["sl"], max_steps=6)
    kitchen.run(
        "sl_basic",
        {"no_register": True, "learning_rate": 3e-4},
        backend="fake",
        log_dir=out["sl_fast"],
        max_steps=6,
    )
    kitchen.run(
        "rl_basic", {"no_register": True}, backend=fake_backend(), log_dir=out["rl"], max_steps=3
    )
    kitchen.run("dpo", {"no_register": True}, backend="fake", log_dir=out["dpo"], max_steps=3)
    return out
