"""The training pass reads in a glance: no function on it (kitchen/adapters/local/train and the
training client) takes more than MAX_PARAMETERS parameters; settings that travel together go as
one value (train/pass_settings.py's PassSettings, batching.py's LossInputs and BatchTarget)."""

import ast
from pathlib import Path

from tests.helpers import write_files

ROOT = Path(__file__).resolve().parents[2]
MAX_PARAMETERS = 6
TRAINING_PASS = (
    "kitchen/adapters/local/train",
    "kitchen/adapters/local/clients/training_client.py",
    "kitchen/adapters/local/clients/training_passes.py",
)


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """Every parameter a caller can pass (self and cls are the method's own)."""
    a = node.args
    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    names += [f"*{p.arg}" for p in (a.vararg, a.kwarg) if p is not None]
    return [n for n in names if n not in ("self", "cls")]


def long_signatures(root: Path, paths: tuple[str, ...] = TRAINING_PASS) -> list[str]:
    """'path:line name(count)' for each function over MAX_PARAMETERS parameters under `paths`."""
    files: list[Path] = []
    for rel in paths:
        here = root / rel
        files += sorted(here.rglob("*.py")) if here.is_dir() else [here]
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                count = len(_parameters(node))
                if count > MAX_PARAMETERS:
                    where = path.relative_to(root).as_posix()
                    found.append(f"{where}:{node.lineno} {node.name}({count})")
    return found


def test_no_function_on_the_training_pass_takes_more_than_six_parameters():
    assert long_signatures(ROOT) == []


def test_the_scan_finds_a_long_signature(tmp_path):
    forward = (
        "def run(model, data, loss_fn, config, tokens, backward, packed):\n    pass\n"
        "class Client:\n    def call(self, a, b, c, d, e, f, *rest):\n        pass\n"
        "def fits(self, a, b, c, d, e, f):\n    pass\n"
    )
    clients = "kitchen/adapters/local/clients"
    write_files(
        tmp_path,
        {
            "kitchen/adapters/local/train/forward.py": forward,
            f"{clients}/training_client.py": "async def step(a, b, c, d, e, f, *, g):\n    pass\n",
            f"{clients}/training_passes.py": "",
        },
    )
    assert long_signatures(tmp_path) == [
        "kitchen/adapters/local/train/forward.py:1 run(7)",
        "kitchen/adapters/local/train/forward.py:4 call(7)",
        "kitchen/adapters/local/clients/training_client.py:1 step(7)",
    ]
