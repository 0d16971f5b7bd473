"""What makes a walk readable, checked against the tracers rather than by a count of files.

docs/architecture.md lists, per recipe, the files of its walk (command line to the engine's
training call), each with its one job; scripts/walk.py finds the files by running the recipe, and
scripts/config_trace.py follows one flag's value through the config resolution. These tests fail
when the page and the tracer differ, when a file on a walk has no job of its own or a job its path
does not name, when more than five files on a walk belong to the recipe, when the training call
(forward_backward to optim_step) takes more than six files, when one value takes
more than six hops or enters a file more than twice while it is resolved, or when a trace leaves
a model registry behind in the user's data dir."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from .snippets import DOCS, ROOT

# one pytest-xdist worker: traced_walk and traced_value trace each recipe once per worker they run on
pytestmark = pytest.mark.xdist_group("architecture_walk")

PAGE = DOCS / "architecture.md"
HEADING = re.compile(
    r"^### `kitchen run (\w+)`: (\d+) files in (\d+) folders, (\d+) of them the recipe's$"
)
ITEM = re.compile(r"^\d+\. `([^`]+)`, \*\*([^*]+)\*\*: ")
SEGMENT_HEADING = re.compile(
    r"^### The training call, `forward_backward` to `optim_step`: (\d+) files in (\d+) folders, "
    r"and the loss$"
)
MAX_SEGMENT_FILES = 6  # the training call's files, its loss included
MAX_RECIPE_FILES = 5
MAX_HOPS = 6
MAX_ENTRIES = 2
MAX_JOB_WORDS = 6
# One flag per paradigm's own config field, traced through the resolution.
TRACED_VALUES = [("dpo", "--dpo-beta", "0.2"), ("rl_basic", "--temperature", "0.7")]


class Walk:
    def __init__(self, files: int, folders: int, recipe_files: int) -> None:
        self.stated = (files, folders, recipe_files)
        self.items: list[tuple[str, str]] = []  # (path, job), in the page's order

    @property
    def files(self) -> list[str]:
        return [path for path, _ in self.items]


def documented_walks(text: str) -> dict[str, Walk]:
    """recipe -> its walk as the page states it."""
    walks: dict[str, Walk] = {}
    recipe = None
    for line in text.splitlines():
        if heading := HEADING.match(line):
            recipe = heading[1]
            walks[recipe] = Walk(int(heading[2]), int(heading[3]), int(heading[4]))
        elif line.startswith("#"):
            recipe = None
        elif recipe is not None and (item := ITEM.match(line)):
            walks[recipe].items.append((item[1], item[2]))
    return walks


def name_words(path: str) -> list[str]:
    """The words of a file's name: its stem's, split at `_`; a package's `__init__.py` is named
    by its folder."""
    p = Path(path)
    stem = p.parent.name if p.stem == "__init__" else p.stem
    return [w for w in stem.split("_") if w]


def names(job: str, word: str) -> bool:
    """Whether `job` says `word`: from one of its words on, it begins as `word` does up to a
    plural `s` (`losses` in "the Tinker losses", `envs` in "the env datasets", `resolve` in
    "resolution", `rundir` in "the run directory")."""
    root = word.lower().rstrip("s")[:4]
    words = re.findall(r"[a-z0-9]+", job.lower())
    return any("".join(words[i:]).startswith(root) for i in range(len(words)))


def job_problems(walks: dict[str, Walk]) -> list[str]:
    """Each file has one job, named by its path: the same job on every walk it is on, a job no
    other file has, one phrase (no `and`, no list) that says the words of the file's name."""
    problems = []
    jobs_of: dict[str, set[str]] = defaultdict(set)
    for recipe, walk in walks.items():
        files = walk.files
        problems += [f"{recipe}: {f} is listed twice" for f in sorted(set(files))
                     if files.count(f) > 1]  # fmt: skip
        for path, job in walk.items:
            jobs_of[path].add(job)
            if re.search(r"\band\b|[,;/&]", job) or len(job.split()) > MAX_JOB_WORDS:
                problems.append(f"{path}: {job!r} is not one job (one phrase, no 'and')")
            if unnamed := [w for w in name_words(path) if not names(job, w)]:
                problems.append(f"{path}: its job {job!r} does not say {', '.join(unnamed)}")
    for path, jobs in sorted(jobs_of.items()):
        if len(jobs) > 1:
            problems.append(f"{path} has {len(jobs)} jobs: {sorted(jobs)}")
    holders: dict[str, set[str]] = defaultdict(set)
    for path, jobs in jobs_of.items():
        for job in jobs:
            holders[job.lower()].add(path)
    problems += [f"{sorted(paths)} share the job {job!r}" for job, paths in sorted(holders.items())
                 if len(paths) > 1]  # fmt: skip
    return problems


def documented_segment(text: str) -> Walk:
    """The training call's segment (forward_backward -> optim_step) as the page states it."""
    segment = None
    for line in text.splitlines():
        if heading := SEGMENT_HEADING.match(line):
            segment = Walk(int(heading[1]), int(heading[2]), 0)
        elif line.startswith("#"):
            if segment is not None:
                break
        elif segment is not None and (item := ITEM.match(line)):
            segment.items.append((item[1], item[2]))
    assert segment is not None, "docs/architecture.md lists no training call segment"
    return segment


WALKS = documented_walks(PAGE.read_text())
SEGMENT = documented_segment(PAGE.read_text())


def test_the_page_lists_the_walks_of_dpo_and_rl_basic():
    assert set(WALKS) == {"dpo", "rl_basic"}
    for recipe, walk in WALKS.items():
        files = walk.files
        assert (len(files), len({os.path.dirname(f) for f in files})) == walk.stated[:2], (
            f"{recipe}: the heading's counts of files and folders"
        )
        missing = [f for f in files if not (ROOT / f).is_file()]
        assert not missing, f"{recipe}: listed but not in the repository: {missing}"


def test_each_file_on_a_walk_has_one_job_named_by_its_path():
    assert job_problems({**WALKS, "forward_backward": SEGMENT}) == []


def test_the_page_lists_the_training_call_within_its_budget():
    files = SEGMENT.files
    assert (len(files), len({os.path.dirname(f) for f in files})) == SEGMENT.stated[:2]
    missing = [f for f in files if not (ROOT / f).is_file()]
    assert not missing, f"the training call's segment lists files not in the repository: {missing}"
    assert len(files) + 1 <= MAX_SEGMENT_FILES  # and the recipe's loss


def test_the_job_check_catches_a_file_without_a_job_of_its_own():
    page = """### `kitchen run a`: 4 files in 2 folders, 0 of them the recipe's
1. `kitchen/app/cli.py`, **the CLI**: parses flags.
2. `kitchen/app/launch.py`, **the run directory**: prepares it.
3. `kitchen/engine/runner.py`, **the runner and its sinks**: runs the graph.
4. `kitchen/engine/phases.py`, **the step clock**: times steps.
5. `kitchen/app/cli.py`, **the CLI**: again.
### `kitchen run b`: 2 files in 1 folders, 0 of them the recipe's
1. `kitchen/app/cli.py`, **the CLI parser**: parses flags.
2. `kitchen/app/rundir.py`, **the run directory**: writes it.
"""
    problems = "\n".join(job_problems(documented_walks(page)))
    assert "a: kitchen/app/cli.py is listed twice" in problems
    assert "kitchen/app/launch.py: its job 'the run directory' does not say launch" in problems
    assert "'the runner and its sinks' is not one job" in problems
    assert "phases.py: its job 'the step clock' does not say phases" in problems
    assert "kitchen/app/cli.py has 2 jobs" in problems
    assert "['kitchen/app/launch.py', 'kitchen/app/rundir.py'] share the job" in problems
    assert len(problems.splitlines()) == 6, problems


def tracer_env(home: Path) -> dict[str, str]:
    """This checkout's code, with a home and user data dir of the test's own (the user's model
    registry lives there), and none named: the tracer must choose where its run registers."""
    env = {k: v for k, v in os.environ.items() if k not in ("KITCHEN_REGISTRY", "XDG_DATA_HOME")}
    return {**env, "HOME": str(home), "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}


def run_tracer(script: str, args: list[str], home: Path) -> dict[str, Any]:
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / script), *args, "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=tracer_env(home),
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.splitlines()[-1])


def assert_no_registry(home: Path) -> None:
    user_data = home / ".local" / "share"
    left = (
        sorted(str(p.relative_to(home)) for p in user_data.rglob("*")) if user_data.exists() else []
    )
    assert left == [], f"the trace wrote into the user's data dir: {left}"


@pytest.fixture(scope="module", params=sorted(WALKS))
def traced_walk(request, tmp_path_factory) -> tuple[str, dict[str, Any], Path]:
    home = tmp_path_factory.mktemp("home")
    return request.param, run_tracer("walk.py", [request.param], home), home


@pytest.fixture(scope="module", params=TRACED_VALUES, ids="".join)
def traced_value(request, tmp_path_factory) -> tuple[dict[str, Any], Path]:
    home = tmp_path_factory.mktemp("home")
    return run_tracer("config_trace.py", list(request.param), home), home


@pytest.mark.slow
def test_the_listed_walk_is_the_traced_walk(traced_walk):
    recipe, traced, _ = traced_walk
    listed = WALKS[recipe].files
    assert sorted(listed) == traced["files"], (
        f"docs/architecture.md's walk of {recipe} is out of date "
        f"(re-run scripts/walk.py {recipe}): only listed "
        f"{sorted(set(listed) - set(traced['files']))}, only traced "
        f"{sorted(set(traced['files']) - set(listed))}"
    )


@pytest.mark.slow
def test_the_listed_training_call_is_the_traced_one(traced_walk):
    recipe, traced, _ = traced_walk
    assert sorted(SEGMENT.files) == traced["segment"], (
        f"docs/architecture.md's training call segment is out of date for {recipe} "
        f"(re-run scripts/walk.py {recipe})"
    )
    assert traced["segment_loss"] == [WALKS[recipe].files[-1]]  # its loss, the walk's last file
    assert len(traced["segment"]) + len(traced["segment_loss"]) <= MAX_SEGMENT_FILES


@pytest.mark.slow
def test_at_most_five_files_on_a_walk_belong_to_the_recipe(traced_walk):
    recipe, traced, _ = traced_walk
    mine = traced["recipe_files"]
    assert len(mine) == WALKS[recipe].stated[2], f"{recipe}: the heading's count of {mine}"
    assert len(mine) <= MAX_RECIPE_FILES, f"{recipe}: {mine}"


@pytest.mark.slow
def test_one_value_takes_at_most_six_hops_while_it_is_resolved(traced_value):
    traced, _ = traced_value
    resolved = traced["resolved"]
    assert 2 <= resolved["hops"] <= MAX_HOPS, f"{traced['command']}: {resolved['path']}"


@pytest.mark.slow
def test_no_file_is_entered_more_than_twice_while_a_value_is_resolved(traced_value):
    traced, _ = traced_value
    entered = traced["resolved"]["entered"]
    assert "kitchen/app/resolve.py" in entered  # the value was followed into the resolution
    again = {f: n for f, n in entered.items() if n > MAX_ENTRIES}
    assert not again, f"{traced['command']}: {again}, along {traced['resolved']['path']}"


@pytest.mark.slow
def test_a_walk_leaves_no_model_registry_behind(traced_walk):
    assert_no_registry(traced_walk[2])


@pytest.mark.slow
def test_a_value_trace_leaves_no_model_registry_behind(traced_value):
    assert_no_registry(traced_value[1])


def test_the_glossary_gives_each_term_once():
    text = PAGE.read_text()
    glossary = text[text.index("## Glossary") :]
    glossary = glossary[: glossary.index("\n## ", 1)]
    terms = [row.split("|")[1].strip() for row in glossary.splitlines() if row.startswith("| ")]
    terms = [t for t in terms if t not in ("term",)]
    assert len(terms) > 20
    assert len(terms) == len({t.lower() for t in terms}), "a glossary term appears twice"
