"""Help fits 100 columns and breaks no sentence mid-line (issue 38: `kitchen run dpo --help`
printed a table about 190 columns wide; `kitchen --help` broke descriptions where their docstring
lines ended). A line may end early only where the next word would not have fitted on it."""

from __future__ import annotations

import itertools
import re

import pytest
import typer
from typer.testing import CliRunner

from kitchen.app.cli import app

WIDTH = 100
runner = CliRunner()


def commands(group=None, prefix=()) -> list[tuple[str, ...]]:
    group = group or typer.main.get_command(app)
    out = []
    for name, sub in group.commands.items():
        out.append((*prefix, name))
        if hasattr(sub, "commands"):
            out.extend(commands(sub, (*prefix, name)))
    return out


def help_text(args: list[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    result = runner.invoke(app, args, terminal_width=WIDTH)
    assert result.exit_code == 0, result.output
    return result.output


def _cells(line: str) -> tuple[str, int]:
    """A help line's text inside its box (or page margin) and the width that text may take."""
    if line.startswith(("│", "╭", "╰")):
        text = line[2:-2].rstrip()
        return (" " + text[1:] if text.startswith("*") else text), WIDTH - 4  # "*": required
    return line[1:].rstrip(), WIDTH - 2


def early_breaks(text: str) -> list[str]:
    """Lines of a wrapped description that end although the next line's first word would have
    fitted: a hard line break inside a sentence. In a box, a description goes on indented past
    the entries' names, below blank cells; typer's "[default: ...]" lines start a new line on
    purpose."""
    found = []
    lines = text.splitlines()
    entry_indent = 0  # where the names of the current box's entries start
    for i, (above, line) in enumerate(itertools.pairwise(lines)):
        if above.startswith("╭"):
            box = itertools.takewhile(lambda x: x.startswith("│"), lines[i + 1 :])
            entry_indent = min(len(b) - len(b.lstrip()) for b in (_cells(x)[0] for x in box) if b)
        (top, width), (body, _) = _cells(above), _cells(line)
        words = body.lstrip()
        column = len(body) - len(words)
        if not words or words.startswith("[") or len(top) <= column:
            continue
        in_box = line.startswith("│")
        if in_box and (column <= entry_indent or top[column - 1] != " " or top[column] == " "):
            continue  # a new entry, or not text that goes on from the line above
        if len(top) + 1 + len(words.split()[0]) < width:
            found.append(f"{above.strip()!r} / {line.strip()!r}")
    return found


@pytest.mark.parametrize(
    "args", [[], *[list(c) for c in commands()]], ids=lambda a: " ".join(a) or "kitchen"
)
def test_command_help_fits_and_breaks_no_sentence(args: list[str], monkeypatch) -> None:
    text = help_text([*args, "--help"], monkeypatch)
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    assert early_breaks(text) == []


@pytest.mark.parametrize(
    "args", [["run", "dpo", "--help"], ["show", "rl_basic"], ["help", "sl_basic"]]
)
def test_recipe_help_fits_and_wraps_descriptions_whole(args: list[str], monkeypatch) -> None:
    text = help_text(args, monkeypatch)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= WIDTH
    for above, line in itertools.pairwise(lines):
        if (
            re.match(r" {6}\S", line)
            and re.match(r" {6}\S", above)
            and not line.strip().startswith("presets:")
        ):
            assert len(above) + 1 + len(line.split()[0]) > WIDTH, (
                above,
                line,
            )  # wrapped, not broken
    entry = next(i for i, x in enumerate(lines) if x.strip().startswith("--learning-rate, -l"))
    assert "float" in lines[entry] and "=" in lines[entry] and lines[entry + 1].startswith("      ")
