"""docs/architecture.md lists, per recipe, the files of its walk (command line to the engine's
training call); scripts/walk.py finds them by running the recipe. These tests fail when the two
differ, when a listed file is gone, or when the glossary gives a term twice."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from .snippets import DOCS, ROOT

PAGE = DOCS / "architecture.md"
HEADING = re.compile(r"^### `kitchen run (\w+)`: (\d+) files in (\d+) folders$")
ITEM = re.compile(r"^\d+\. `([^`]+)`")


def documented_walks(text: str) -> dict[str, tuple[list[str], int, int]]:
    """recipe -> (the files its walk lists, the file and folder counts its heading states)."""
    walks: dict[str, tuple[list[str], int, int]] = {}
    recipe = None
    for line in text.splitlines():
        if heading := HEADING.match(line):
            recipe = heading[1]
            walks[recipe] = ([], int(heading[2]), int(heading[3]))
        elif line.startswith("#"):
            recipe = None
        elif recipe is not None and (item := ITEM.match(line)):
            walks[recipe][0].append(item[1])
    return walks


WALKS = documented_walks(PAGE.read_text())


def test_the_page_lists_the_walks_of_dpo_and_rl_basic():
    assert set(WALKS) == {"dpo", "rl_basic"}
    for recipe, (files, n_files, n_folders) in WALKS.items():
        assert len(files) == len(set(files)) == n_files, f"{recipe}: the heading's count"
        assert len({os.path.dirname(f) for f in files}) == n_folders, f"{recipe}: folders"
        missing = [f for f in files if not (ROOT / f).is_file()]
        assert not missing, f"{recipe}: listed but not in the repository: {missing}"


@pytest.mark.slow
@pytest.mark.parametrize("recipe", sorted(WALKS))
def test_the_listed_walk_is_the_traced_walk(recipe: str):
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "walk.py"), recipe, "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"},
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    traced = json.loads(run.stdout.splitlines()[-1])["files"]
    listed = WALKS[recipe][0]
    assert sorted(listed) == traced, (
        f"docs/architecture.md's walk of {recipe} is out of date "
        f"(re-run scripts/walk.py {recipe}): "
        f"only listed {sorted(set(listed) - set(traced))}, only traced {sorted(set(traced) - set(listed))}"
    )


def test_the_glossary_gives_each_term_once():
    text = PAGE.read_text()
    glossary = text[text.index("## Glossary") :]
    glossary = glossary[: glossary.index("\n## ", 1)]
    terms = [row.split("|")[1].strip() for row in glossary.splitlines() if row.startswith("| ")]
    terms = [t for t in terms if t not in ("term",)]
    assert len(terms) > 20
    assert len(terms) == len({t.lower() for t in terms}), "a glossary term appears twice"
