"""The same recipe on three training backends, changing nothing but the backend's name.

    python examples/swap_backend.py                            # fake, local, and tinker via kitchen serve
    python examples/swap_backend.py --backends fake,local      # skip the tinker leg
    TINKER_API_KEY=tml-... python examples/swap_backend.py --backends tinker --no-serve
                                                               # the hosted Tinker service

- `fake`: the test oracle. No model: a rule whose loss falls as optim steps accumulate.
- `local`: the embedded torch engine (here on the tiny built-in model, on CPU).
- `tinker`: the official Tinker SDK. Without an API key for the hosted service, this example starts
  `kitchen serve` (the local engine behind the Tinker HTTP protocol) on a free loopback port and
  points the SDK at it with TINKER_BASE_URL, so the leg runs offline.

Each backend implements the same ports (kitchen/ports.py: ServiceClient-shaped training and
sampling clients returning futures), so a recipe never knows which one it runs on.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any

import kitchen

RECIPE = "sl_loop"
OVERRIDES: dict[str, Any] = {
    "model_name": "kitchen/tiny-llama",
    "batch_size": 4,
    "max_length": 96,
    "lora_rank": 8,
    "learning_rate": 1e-3,
    "save_every": 0,
    "register_model": False,
}
STEPS = 3


@contextmanager
def kitchen_serve(model: str) -> Generator[str]:
    """`kitchen serve` in a subprocess on a free loopback port; yields its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    checkpoints = tempfile.mkdtemp(prefix="kitchen-serve-")
    cmd = [sys.executable, "-m", "kitchen.app.cli", "serve", "--port", str(port), "--model", model]
    proc = subprocess.Popen([*cmd, "--checkpoint-dir", checkpoints])
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"kitchen serve exited with {proc.returncode}")
            try:
                with urllib.request.urlopen(f"{url}/api/v1/healthz", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"kitchen serve at {url} not ready after 120 s") from None
            time.sleep(0.2)
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(checkpoints, ignore_errors=True)


def build_workflow() -> kitchen.Workflow[Any]:
    """The plan every leg runs: the same workflow, whatever the backend."""
    recipe = kitchen.RECIPES.get(RECIPE)()
    return recipe.workflow(recipe.bind(recipe.Config.model_validate(OVERRIDES)))


def run_on(backend: str, log_root: str) -> kitchen.RunResult:
    result = kitchen.run(
        RECIPE,
        {**OVERRIDES, "backend": backend},  # the only thing that changes
        log_dir=f"{log_root}/{backend}",
        if_exists="delete",
        max_steps=STEPS,
    )
    nll = [m["train_mean_nll"] for m in result.metrics if "train_mean_nll" in m]
    print(f"{backend:>6}: {result.steps} steps, train_mean_nll {nll[0]:.3f} -> {nll[-1]:.3f}")
    return result


def main(argv: list[str] | None = None) -> dict[str, kitchen.RunResult]:
    parser = argparse.ArgumentParser(description="One recipe, three backends")
    parser.add_argument("--backends", default="fake,local,tinker", help="comma-separated")
    parser.add_argument(
        "--no-serve",
        action="store_true",
        help="tinker: use TINKER_API_KEY / TINKER_BASE_URL as set, do not start kitchen serve",
    )
    parser.add_argument("--log-dir", default="runs/examples/swap_backend")
    args = parser.parse_args(argv)
    results: dict[str, kitchen.RunResult] = {}
    for backend in args.backends.split(","):
        if backend != "tinker" or args.no_serve:
            results[backend] = run_on(backend, args.log_dir)
            continue
        with kitchen_serve(OVERRIDES["model_name"]) as url:
            os.environ["TINKER_BASE_URL"] = url
            os.environ.setdefault(
                "TINKER_API_KEY", "tml-local"
            )  # kitchen serve accepts any tml- key
            results[backend] = run_on(backend, args.log_dir)
    return results


if __name__ == "__main__":
    main()
