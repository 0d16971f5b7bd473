"""Kitchen processes share cores instead of spinning on them (issue 34): importing kitchen sets
OMP_WAIT_POLICY=PASSIVE before torch loads, unless the user chose a policy. libgomp prints the spin
count it actually uses under OMP_DISPLAY_ENV=VERBOSE, so the test reads what torch's runtime took."""

from __future__ import annotations

import os
import re
import subprocess
import sys


def _spin_count(code: str, policy: str | None) -> int:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    env["OMP_DISPLAY_ENV"] = "VERBOSE"
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    found = re.search(r"GOMP_SPINCOUNT = '(\d+)'", proc.stderr)
    assert found, proc.stderr[-2000:]
    return int(found.group(1))


def test_the_cli_makes_torch_wait_passively() -> None:
    # every entry (the CLI, serve, kitchen.app.launch, bench scripts) imports the kitchen package first
    assert _spin_count("import kitchen.app.cli; import torch", None) == 0


def test_without_kitchen_torch_spins() -> None:
    # the default the setting replaces, so the test above can tell the difference
    assert _spin_count("import torch", None) > 0


def test_a_policy_the_user_set_is_kept() -> None:
    assert _spin_count("import kitchen; import torch", "ACTIVE") > 300_000
