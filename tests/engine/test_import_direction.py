"""cookbook -> kitchen -> train_core -> tinker.types; inside kitchen, app -> workflows -> engine and
adapters -> engine, never the reverse; heavy libraries only in adapters and the server."""

import ast
from pathlib import Path

from tests.helpers import modules_loaded_by

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {"train_core": {"kitchen", "cookbook"}, "kitchen": {"cookbook"}, "cookbook": set()}
HEAVY = {"torch", "transformers", "peft", "datasets", "fastapi", "uvicorn", "safetensors", "gguf"}


def _imports(path: Path, module_level_only: bool) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    nodes = tree.body if module_level_only else list(ast.walk(tree))
    out = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def test_packages_import_only_downwards():
    bad = []
    for package, forbidden in FORBIDDEN.items():
        for path in sorted((ROOT / package).rglob("*.py")):
            for line, name in _imports(path, module_level_only=False):
                if name.split(".")[0] in forbidden:
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not bad, "\n".join(bad)


# Inside kitchen: a layer never imports the layers listed against it (ports and the package root are
# shared vocabulary). The server is an inbound adapter: it may import the local engine.
LAYER_FORBIDDEN = {
    "engine": {"app", "workflows", "adapters", "serve"},
    "workflows": {"app", "adapters", "serve"},
    "adapters": {"app", "workflows", "serve"},
    "serve": {"app", "workflows"},
}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "kitchen" and len(parts) > 1 else None


def test_kitchen_layers_import_only_downwards():
    bad = []
    for layer, forbidden in LAYER_FORBIDDEN.items():
        for path in sorted((ROOT / "kitchen" / layer).rglob("*.py")):
            for line, name in _imports(path, module_level_only=False):
                if _layer(name) in forbidden:
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not bad, "\n".join(bad)


def test_heavy_libraries_are_imported_lazily_and_only_by_adapters():
    bad = []
    for package in FORBIDDEN:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            in_adapter = rel.parts[:2] in {("kitchen", "adapters"), ("kitchen", "serve")}
            for line, name in _imports(path, module_level_only=not in_adapter):
                top = name.split(".")[0]
                if top in HEAVY and not in_adapter:
                    bad.append(
                        f"{rel}:{line} imports {name} at module level outside kitchen/adapters and kitchen/serve"
                    )
    assert not bad, "\n".join(bad)


HEAVY_LOADED = ("torch", "transformers", "peft", "datasets")


def test_help_loads_no_heavy_library():
    assert modules_loaded_by("import kitchen.app.cli", HEAVY_LOADED) == []


def test_dry_run_path_loads_no_model_library():
    # The tinker SDK's own types import torch when it is installed; nothing of ours loads the rest.
    loaded = modules_loaded_by(
        "import kitchen.app.launch, kitchen.workflows.supervised, cookbook.recipes.sl_basic",
        HEAVY_LOADED,
    )
    assert loaded in ([], ["torch"])
