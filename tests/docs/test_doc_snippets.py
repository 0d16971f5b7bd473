"""Every ```python block in docs/ runs: a page's blocks in order in one namespace, from a scratch
directory, with the registries restored afterwards. Blocks that train use the fake backend or the
tiny model. `no-run` blocks are shown, never run: keep them rare (this test caps them)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from kitchen.engine import plugins

from .snippets import DOCS, blocks, pages_with_python, run_page

PAGES = pages_with_python()


@pytest.fixture
def restored_globals():
    """A page may register a recipe or an adapter, or install an OpenTelemetry tracer provider
    (process-wide, settable once); the rest of the test session must see neither."""
    from opentelemetry import trace

    # The built-in adapters register on first import: import them before the snapshot, or the
    # restore would empty the tables for good (the module is cached, so it never registers again).
    import kitchen.app.builtins  # noqa: F401
    from kitchen.engine import telemetry

    tables = {
        name: copy.copy(table._items)
        for name, table in vars(plugins).items()
        if isinstance(table, plugins.Plugins)
    }
    provider, provider_set = trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE._done
    yield
    for name, items in tables.items():
        getattr(plugins, name)._items = items
    trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE._done = provider, provider_set
    if hasattr(telemetry._tracer, "_real_tracer"):
        telemetry._tracer._real_tracer = None


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_python_blocks_of_the_page_run(page: Path, tmp_path, monkeypatch, restored_globals):
    monkeypatch.chdir(tmp_path)  # runs/ and any file a block writes land here
    skipped = run_page(page)
    if skipped:
        pytest.skip(f"needs {', '.join(m for b in skipped for m in b.missing)} (optional)")


def test_the_docs_have_code_and_few_no_run_blocks():
    all_blocks = [b for page in sorted(DOCS.rglob("*.md")) for b in blocks(page)]
    python = [b for b in all_blocks if b.lang == "python"]
    no_run = [f"{b.page.name}:{b.line}" for b in python if not b.runnable]
    assert len(python) >= 20
    assert len(no_run) <= 3, f"no-run blocks: {no_run}"


def test_every_python_block_parses():
    for page in sorted(DOCS.rglob("*.md")):
        for block in blocks(page):
            if block.lang == "python":
                compile(block.code, f"{page}:{block.line}", "exec")
