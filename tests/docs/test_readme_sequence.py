"""The README's commands run in order, as a newcomer types them into one shell on a fresh clone
(issue 38): each ```sh line, then the ```python block twice. They run in a scratch directory with
a PATH that has no `kitchen` until the README's `source .venv/bin/activate`, so a README that
uses `kitchen` before saying where it comes from fails here.

What the test changes, so that it runs in minutes on a CPU (a newcomer's commands train for real):
- `make demo` (it installs .venv, then runs the Makefile's demo command) runs only that command.
- `source .venv/bin/activate` puts this test's interpreter's bin folder (the installed venv) on PATH.
- a `kitchen run` without --dry-run gets `--backend fake -m kitchen/tiny-llama` and its
  `--max-steps N` becomes N/5 (3 where it has none); the commands that continue a run
  (`--log-dir runs/sl_lr`, resumed) run on the tiny model in the local engine instead, since the
  fake backend's checkpoints live only as long as its process.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)
VENV_BIN = Path(sys.executable).parent


def blocks(lang: str) -> list[str]:
    return [m.group(2) for m in FENCE.finditer(README.read_text()) if m.group(1) == lang]


def commands() -> list[str]:
    """Each line of the README's ```sh blocks, in order, its trailing `  # comment` dropped."""
    lines = (line for block in blocks("sh") for line in block.splitlines())
    return [re.split(r"\s{2,}# ", line)[0].strip() for line in lines if line.strip()]


def demo_command() -> str:
    """The command `make demo` runs once .venv is installed, from the Makefile (it calls
    .venv/bin/kitchen by its path: here the installed venv's)."""
    recipe = re.search(r"^demo:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert recipe, "Makefile has no demo target"
    line = next(x.strip() for x in recipe.group(1).splitlines() if "kitchen" in x)
    return line.replace("$(BIN)/kitchen", str(VENV_BIN / "kitchen"))


def for_the_test(command: str) -> str:
    words = shlex.split(command)
    if Path(words[0]).name != "kitchen" or words[1] != "run" or "--dry-run" in words:
        return command
    steps = 3
    if "--max-steps" in words:
        at = words.index("--max-steps")
        steps = max(1, int(words[at + 1]) // 5)
        del words[at : at + 2]
    local = "runs/sl_lr" in words  # continued by --if-exists resume: needs real checkpoints
    backend = [] if local else ["--backend", "fake"]
    return shlex.join([*words, *backend, "-m", "kitchen/tiny-llama", "--max-steps", str(steps)])


def test_the_readme_says_where_kitchen_comes_from_before_using_it() -> None:
    sequence = commands()
    first_use = next(i for i, c in enumerate(sequence) if c.startswith("kitchen "))
    assert "source .venv/bin/activate" in sequence[:first_use]
    assert sequence[0] == "make demo"


@pytest.mark.slow  # a newcomer's first hour: ~20 commands, two of them train the tiny model
def test_the_readme_commands_run_in_order(tmp_path: Path) -> None:
    path = "/usr/bin:/bin"  # no kitchen until the README activates .venv
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
    outputs = {}
    for command in commands():
        if command == "make demo":
            command = demo_command()
        if command == "source .venv/bin/activate":
            path = f"{VENV_BIN}:{path}"
            continue
        run = for_the_test(command)
        done = subprocess.run(["bash", "-c", run], cwd=tmp_path, env={**env, "PATH": path},
                              capture_output=True, text=True, timeout=600)  # fmt: skip
        assert done.returncode == 0, (
            f"{command!r} (as {run!r}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        )
        outputs[command] = done.stdout
    assert (tmp_path / "runs/sl_basic/report.html").is_file()
    assert (tmp_path / "runs/dpo/report.html").is_file()
    listed = outputs["kitchen models list"]
    assert re.search(r"^sl_basic:1\s+sl_basic\s+local\s", listed, re.M), listed
    assert str(tmp_path / "runs/sl_lr") in listed  # the registered run's directory
    assert "dpo:" not in listed  # the dpo run was on the fake backend: not registered
    # the Python block runs twice into the same run directory
    (python,) = blocks("python")
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", python], cwd=tmp_path, env={**env, "PATH": path},
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        assert re.match(r"\d+ \{'step': \d+", done.stdout.splitlines()[-1]), done.stdout[-500:]
