"""docs/cli.md and the recipe pages' config tables are generated from the code; these tests fail
when the committed files drift from what scripts/gen_cli_reference.py would write now."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from kitchen.engine.plugins import RECIPES

from .snippets import DOCS, ROOT


def _generator():
    name = "gen_cli_reference"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


FIX = "run `.venv/bin/python scripts/gen_cli_reference.py` and commit the result"


def test_cli_reference_matches_the_code():
    expected = _generator().render_cli_md()
    assert (DOCS / "cli.md").read_text() == expected, f"docs/cli.md is out of date: {FIX}"


@pytest.mark.parametrize("name", sorted(RECIPES.names()))
def test_recipe_page_exists_and_its_config_table_matches(name: str):
    gen = _generator()
    page = DOCS / "recipes" / f"{name}.md"
    assert page.exists(), f"recipe {name} has no page docs/recipes/{name}.md"
    text = page.read_text()
    if name != "code_rl":  # written elsewhere; checked only if it carries the markers
        assert gen.BEGIN in text, f"{page.name} has no generated config table"
    from kitchen.app.resolve import get_recipe

    assert gen.refreshed_recipe_page(text, get_recipe(name)) == text, f"{page.name}: {FIX}"


def _recipe_flags(text: str, name: str) -> set[str]:
    """The flags in the first column of recipe `name`'s table in docs/cli.md."""
    start = text.index(f"### {name}\n")
    end = text.find("\n### ", start + 1)
    rows = [r for r in text[start : end if end >= 0 else None].splitlines() if r.startswith("| `-")]
    return {f for row in rows for f in row.split("|")[1].strip().strip("`").split(", ")}


def test_the_reference_lists_every_flag_each_recipe_takes_and_each_parses():
    """docs/cli.md is the record of the flags users type (fields, aliases, short flags): a flag the
    code drops leaves its recipe's table, a diff the check above makes visible."""
    from kitchen.app.resolve import flags_of, get_recipe, parse_overrides

    text = (DOCS / "cli.md").read_text()
    for name in RECIPES.names():
        model = get_recipe(name).Config
        listed = _recipe_flags(text, name)
        assert listed == set(flags_of(model)), name
        for f in sorted(listed):  # the parser knows each flag (values are checked later)
            assert parse_overrides(model, [f"{f}=1"], name), (name, f)


def test_check_mode_reports_drift(tmp_path: Path, monkeypatch):
    gen = _generator()
    stale = tmp_path / "cli.md"
    stale.write_text("old\n")
    monkeypatch.setattr(gen, "expected_files", lambda: {stale: "new\n"})
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    assert gen.main(["--check"]) == 1 and stale.read_text() == "old\n"
    assert gen.main([]) == 0 and stale.read_text() == "new\n"
    assert gen.main(["--check"]) == 0
