"""cookbook -> kitchen -> train_core -> tinker.types; inside kitchen, app -> workflows -> engine and
adapters -> engine, never the reverse; heavy libraries only in adapters and the server."""

import ast
from collections.abc import Callable
from pathlib import Path

from tests.helpers import modules_loaded_by, write_files

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN: dict[str, set[str]] = {
    "train_core": {"kitchen", "cookbook"},
    "kitchen": {"cookbook"},
    "cookbook": set(),
}
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


def _package(module: str) -> str:
    return module.split(".")[0]


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "kitchen" and len(parts) > 1 else None


Rules = dict[str, set[str]]  # folder -> what its imports must not name


def _violations(root: Path, rules: Rules, named: Callable[[str], str | None]) -> list[str]:
    """Every import (module level or inside a function) in a folder whose `named(module)` is one
    its rule forbids, as 'path:line imports module'."""
    bad = []
    for folder, forbidden in rules.items():
        for path in sorted((root / folder).rglob("*.py")):
            for line, name in _imports(path, module_level_only=False):
                if named(name) in forbidden:
                    bad.append(f"{path.relative_to(root)}:{line} imports {name}")
    return bad


def test_packages_import_only_downwards():
    bad = _violations(ROOT, FORBIDDEN, _package)
    assert not bad, "\n".join(bad)


# What cookbook may use of kitchen: the ports (the sandbox port included), the engine's vocabulary
# and the workflows; never an adapter, the app or the server, which are chosen at run time by name.
COOKBOOK_FORBIDDEN: Rules = {"cookbook": {"adapters", "app", "serve"}}


def test_cookbook_never_imports_an_adapter_the_app_or_the_server():
    bad = _violations(ROOT, COOKBOOK_FORBIDDEN, _layer)
    assert not bad, "\n".join(bad)


# Inside kitchen: a layer never imports the layers listed against it (ports and the package root are
# shared vocabulary). The server is an inbound adapter: it may import the local engine.
LAYER_FORBIDDEN: Rules = {
    "kitchen/engine": {"app", "workflows", "adapters", "serve"},
    "kitchen/ports": {"app", "workflows", "adapters", "serve"},
    "kitchen/workflows": {"app", "adapters", "serve"},
    "kitchen/adapters": {"app", "workflows", "serve"},
    "kitchen/serve": {"app", "workflows"},
}


def test_kitchen_layers_import_only_downwards():
    bad = _violations(ROOT, LAYER_FORBIDDEN, _layer)
    assert not bad, "\n".join(bad)


def _adapter(module: str) -> str | None:
    """The adapter a module belongs to ("local", "vllm", ...), or None outside kitchen/adapters."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["kitchen", "adapters"] and len(parts) > 2 else None


# The local engine is handed what it runs beside (the samplers of --sampler vllm, by
# kitchen/adapters/samplers.py): it imports no other adapter, so a run on its own loads none.
LOCAL_FORBIDDEN: Rules = {"kitchen/adapters/local": {"vllm", "samplers", "tinker", "fake"}}


def test_the_local_engine_imports_no_other_adapter():
    bad = _violations(ROOT, LOCAL_FORBIDDEN, _adapter)
    assert not bad, "\n".join(bad)


def _room(module: str) -> str | None:
    """The room of the local engine a module is in: its sub-package ("model", "train", ...), or
    "front" for the files at the top (the backend, the remote samplers' seam); None outside the
    engine."""
    parts = module.split(".")
    if parts[:3] != ["kitchen", "adapters", "local"]:
        return None
    return parts[3] if len(parts) > 3 and parts[3] in FLOORS else "front"


# The local engine's rooms by job, one floor each, lowest first: a room imports its own modules
# and the floors below it. The model (loading and holding it) is the ground floor; the training
# pass and sampling build on it (sampling on the pass's batching); the ranks of a --nproc N run
# (their commands, their world, the sharded base) run both; the clients run the pass and sampling
# and tell the ranks each call through the executor they call; the front (the backend, the remote
# samplers' seam) opens it all. docs/architecture.md draws these rooms.
FLOORS = ("model", "train", "sample", "distributed", "clients", "front")
# What the training pass and sampling must never reach, whatever the floors say.
ROOMS_FORBIDDEN: Rules = {
    "kitchen/adapters/local/train": {"distributed", "clients", "front"},
    "kitchen/adapters/local/sample": {"distributed", "clients", "front"},
}


def _upward(root: Path) -> set[str]:
    """Every import (module level, inside a function or for type checking alike) in the local
    engine that names a room on a higher floor than its own, as 'path -> module'."""
    local = root / "kitchen" / "adapters" / "local"
    found = set()
    for path in sorted(local.rglob("*.py")):
        rel = path.relative_to(root)
        here = _room(".".join(rel.with_suffix("").parts))
        assert here in FLOORS, f"{rel} is in no room of FLOORS"
        for _, name in _imports(path, module_level_only=False):
            there = _room(name)
            if there is not None and FLOORS.index(there) > FLOORS.index(here):
                found.add(f"{rel.as_posix()} -> {name}")
    return found


def test_the_local_engine_imports_only_down_its_floors():
    assert _upward(ROOT) == set()


def test_training_and_sampling_never_import_the_clients_or_the_ranks():
    bad = _violations(ROOT, ROOMS_FORBIDDEN, _room)
    assert not bad, "\n".join(bad)


def test_the_room_checks_flag_an_import_up_a_floor(tmp_path):
    forward = (
        "from kitchen.adapters.local.model.host import model_limits\n"
        "def f():\n    from kitchen.adapters.local.distributed.world import World\n"
    )
    deal = "from kitchen.adapters.local.executor import SOLO\n"
    train = "kitchen/adapters/local/train"
    write_files(tmp_path, {f"{train}/forward.py": forward, f"{train}/deal.py": deal})
    assert _upward(tmp_path) == {
        "kitchen/adapters/local/train/forward.py -> kitchen.adapters.local.distributed.world",
        "kitchen/adapters/local/train/deal.py -> kitchen.adapters.local.executor",
    }
    assert _violations(tmp_path, ROOMS_FORBIDDEN, _room) == [
        "kitchen/adapters/local/train/deal.py:1 imports kitchen.adapters.local.executor",
        "kitchen/adapters/local/train/forward.py:3 imports kitchen.adapters.local.distributed.world",
    ]


def _reaches_the_world(root: Path) -> list[str]:
    """Every place in the local engine outside distributed/ that imports the ranks' World or reads
    a `world` (name or attribute): those go through the executor the backend picked."""
    bad = []
    local = root / "kitchen" / "adapters" / "local"
    for path in sorted(local.rglob("*.py")):
        if "distributed" in path.relative_to(local).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            named = (
                (isinstance(node, ast.Name) and node.id == "world")
                or (isinstance(node, ast.Attribute) and node.attr == "world")
                or (isinstance(node, ast.ImportFrom) and (node.module or "").endswith(".world"))
            )
            if named:
                bad.append(f"{path.relative_to(root)}:{node.lineno}")  # type: ignore[attr-defined]
    return bad


def test_the_local_engine_reaches_the_ranks_only_through_its_executor(tmp_path):
    assert _reaches_the_world(ROOT) == []
    client = "def f(backend):\n    return backend.world is None\n"
    write_files(tmp_path, {"kitchen/adapters/local/client.py": client})
    assert _reaches_the_world(tmp_path) == ["kitchen/adapters/local/client.py:2"]


def test_the_checks_flag_a_cookbook_or_workflow_that_imports_an_adapter(tmp_path):
    # The checks above pass on a clean tree; this shows they would fail on the imports they forbid,
    # at module level and inside a function alike.
    env = (
        "from kitchen.ports.sandbox import SandboxPort\n"
        "from kitchen.adapters.sandbox import make_sandbox\n"
    )
    stages = "def f():\n    import kitchen.adapters.local.backend\n"
    write_files(tmp_path, {"cookbook/envs/env.py": env, "kitchen/workflows/rl/stages.py": stages})
    assert _violations(tmp_path, COOKBOOK_FORBIDDEN, _layer) == [
        "cookbook/envs/env.py:2 imports kitchen.adapters.sandbox"
    ]
    assert _violations(tmp_path, LAYER_FORBIDDEN, _layer) == [
        "kitchen/workflows/rl/stages.py:2 imports kitchen.adapters.local.backend"
    ]
    backend = (
        "from kitchen.adapters.local.model.host import ModelHost\n"
        "def f():\n    from kitchen.adapters.vllm.samplers import VllmSamplers\n"
    )
    write_files(tmp_path, {"kitchen/adapters/local/backend.py": backend})
    assert _violations(tmp_path, LOCAL_FORBIDDEN, _adapter) == [
        "kitchen/adapters/local/backend.py:3 imports kitchen.adapters.vllm.samplers"
    ]


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
