"""tinker-cookbook 0.6.1's own recipe smoke tests (its sdist's tests/recipes) against `kitchen serve`.

Run by hand (not part of `make test`; on a CPU machine it takes up to an hour):

    .venv/bin/python -m tests.cookbook_compat.run_upstream_smoke [--tests DIR] [--only NAME ...]

Each upstream test body runs as written, with one change: its `run_recipe` launches the module
through `tests.cookbook_compat.offline_data` (the datasets it loads answered offline) instead of
`uv run python -m`, against one `kitchen serve` with tiny models placed under the cookbook's model
names. Prints one line per test: PASS/FAIL, seconds, and the last line of its failure.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.helpers import FAMILY_TOKENS, place_in_hub_cache
from tests.tinker_backend.conftest import TEST_KEY, serve_process

from .hf_cache import build_hub_cache

VERSION = "0.6.1"
# Every model name the smoke tests and their recipes' defaults name (Qwen 3.5+ family: thinking
# tokens in the vocabulary, so the qwen3_5 renderers run).
QWEN_NAMES = [
    "Qwen/Qwen3.5-4B",
    "Qwen/Qwen3.5-9B",
    "Qwen/Qwen3.5-9B-Base",
    "Qwen/Qwen3.5-397B-A17B",
    "Qwen/Qwen3.6-27B",
    "Qwen/Qwen3.6-35B-A3B",
    "Qwen/Qwen3.8-27B",
]


# Log lines of a run that exits 0 having trained nothing: reported, never counted as a pass.
_NOTHING_TRAINED = ("= 0 steps", "Will train on 0 batches")


def upstream_tests(cache: Path) -> Path:
    """tests/recipes of the tinker-cookbook sdist (pip download, once)."""
    root = cache / f"tinker_cookbook-{VERSION}"
    if not root.is_dir():
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
        cmd += [f"tinker-cookbook=={VERSION}", "-d", str(cache)]
        subprocess.run(cmd, check=True, capture_output=True)
        with tarfile.open(cache / f"tinker_cookbook-{VERSION}.tar.gz") as archive:
            archive.extractall(cache, filter="data")
    return root / "tests" / "recipes"


class RecipeFailed(Exception):
    pass


def make_runner(env: dict[str, str], timeout_s: int, log: Path) -> Callable[..., None]:
    """The upstream `run_recipe(module, args, timeout, max_steps)`, launched offline."""

    def run_recipe(
        module: str, args: list[str] | None = None, timeout: int = 0, max_steps: int = 2
    ) -> None:
        cmd = [sys.executable, "-m", "tests.cookbook_compat.offline_data", module]
        cmd += [*(args or []), f"max_steps={max_steps}"]
        with log.open("ab") as sink:
            sink.write(f"\n>>> {' '.join(cmd)}\n".encode())
            sink.flush()
            try:
                code = subprocess.run(
                    cmd, env=env, stdout=sink, stderr=subprocess.STDOUT, timeout=timeout_s
                ).returncode
            except subprocess.TimeoutExpired:
                raise RecipeFailed(f"ran past {timeout_s} s") from None
        if code != 0:
            raise RecipeFailed(f"exit {code}: {_last_error(log)}")

    return run_recipe


def _last_error(log: Path) -> str:
    """The most telling line of a failed run: its last exception line, else its last line."""
    lines = [x for x in log.read_text(errors="replace").splitlines() if x.strip()]
    errors = [x for x in lines if "Error" in x or "Exception" in x]
    return (errors or lines or ["(no output)"])[-1].strip()[:300]


def collect(test_dir: Path, run_recipe: Callable[..., None]) -> dict[str, Callable[[], Any]]:
    """`file::test` -> the upstream test function, its module run with our run_recipe."""
    found = {}
    for path in sorted(test_dir.glob("test_*.py")):
        source = path.read_text().replace("from tests.helpers import run_recipe", "")
        namespace: dict[str, Any] = {"run_recipe": run_recipe, "__name__": path.stem}
        exec(compile(source, str(path), "exec"), namespace)
        for name, fn in namespace.items():
            if name.startswith("test_") and callable(fn):
                found[f"{path.stem}::{name}"] = fn
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tests", type=Path, help="tinker-cookbook's tests/recipes folder")
    parser.add_argument("--only", nargs="*", default=[], help="substrings of tests to run")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per recipe run")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "kitchen-smoke")
    opts = parser.parse_args()
    opts.work.mkdir(parents=True, exist_ok=True)
    test_dir = opts.tests or upstream_tests(opts.work)
    hf_home = build_hub_cache(opts.work / "hf")
    for name in QWEN_NAMES:
        place_in_hub_cache(hf_home / "hub", name, "kitchen/tiny-qwen", FAMILY_TOKENS)
    checkpoints = opts.work / "serve"
    checkpoints.mkdir(exist_ok=True)
    hf = {"HF_HOME": str(hf_home)}
    results = []
    # Two shared cores can starve a client's heartbeat thread for over 30 s in a long recipe.
    with serve_process([], checkpoints, hf, ["--session-timeout", "300"]) as url:
        env = {**os.environ, **hf, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        env["KITCHEN_OFFLINE_ROWS"] = "1600"  # full default batches (256) for 6 steps
        env |= {"TINKER_BASE_URL": url, "TINKER_API_KEY": TEST_KEY}
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
        logs = opts.work / "logs"
        logs.mkdir(exist_ok=True)
        for test_id, fn in collect(test_dir, lambda *a, **k: None).items():
            if opts.only and not any(s in test_id for s in opts.only):
                continue
            log = logs / f"{test_id.replace('::', '.')}.log"
            log.unlink(missing_ok=True)
            runner = make_runner(env, opts.timeout, log)
            fn = collect(test_dir, runner)[test_id]
            start = time.monotonic()
            try:
                fn()
                verdict, reason = "PASS", ""
                if any(mark in log.read_text(errors="replace") for mark in _NOTHING_TRAINED):
                    verdict, reason = "EMPTY", "exited 0 but trained 0 steps (too few rows?)"
            except Exception as e:  # a failed recipe or a failed upstream assertion
                verdict = "FAIL"
                reason = str(e) if isinstance(e, RecipeFailed) else traceback.format_exc(-1)
            line = f"{verdict}  {time.monotonic() - start:6.0f}s  {test_id}  {reason.strip()}"
            print(line.splitlines()[0][:400], flush=True)
            results.append(verdict)
    print(f"{results.count('PASS')} of {len(results)} passed; logs in {opts.work / 'logs'}")
    return 0 if results and all(v == "PASS" for v in results) else 1


if __name__ == "__main__":
    sys.exit(main())
