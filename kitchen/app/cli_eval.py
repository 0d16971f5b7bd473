"""`kitchen eval MODEL --tasks T[,T...]`: EleutherAI lm-eval-harness through the OpenAI-compatible
endpoint of `kitchen serve` (started for the run, or --url of a running one).

Scoring tasks (multiple_choice, loglikelihood) go through /v1/completions (lm-eval's
local-completions); generation tasks through /v1/chat/completions with the model's own chat format
(local-chat-completions), or /v1/completions with --no-chat. Tasks: lm-eval's own (if their data is
cached) or the offline ones shipped in cookbook/data/eval_tasks (pip_mc, pip_chat).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Annotated, Any

import typer

SHIPPED_TASKS = Path(__file__).resolve().parents[2] / "cookbook" / "data" / "eval_tasks"
LOGLIKELIHOOD_TYPES = {"multiple_choice", "loglikelihood", "loglikelihood_rolling"}


def command(
    model: Annotated[
        str,
        typer.Argument(help="A base model name, or a sampler checkpoint folder / tinker:// path"),
    ],
    tasks: Annotated[str, typer.Option("--tasks", help="Comma-separated lm-eval task names")],
    harness: Annotated[str, typer.Option("--harness", help="Eval harness: lm-eval")] = "lm-eval",
    limit: Annotated[
        int | None, typer.Option("--limit", help="At most N documents per task")
    ] = None,
    chat: Annotated[
        bool, typer.Option("--chat/--no-chat", help="Generation tasks through the chat endpoint")
    ] = True,
    url: Annotated[
        str | None, typer.Option("--url", help="A running kitchen serve (default: start one)")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", help="Write the results as JSON")
    ] = None,
    start_timeout: Annotated[
        float, typer.Option("--start-timeout", help="Seconds the started server has to be ready")
    ] = 300.0,
) -> None:
    """Score a model or checkpoint with lm-eval-harness through `kitchen serve`."""
    if harness != "lm-eval":
        typer.echo(f"error: --harness {harness!r}: expected lm-eval", err=True)
        raise typer.Exit(2)
    try:
        import lm_eval
        from lm_eval.tasks import TaskManager, get_task_dict
    except ModuleNotFoundError as e:
        typer.echo(f"error: kitchen eval needs {e.name}: pip install 'kitchen[eval]'", err=True)
        raise typer.Exit(2) from None
    from kitchen.adapters.local import resolve_model
    from kitchen.adapters.local.export import inspect_checkpoint
    from kitchen.engine.errors import KitchenError

    is_checkpoint = Path(model).is_dir() and not (Path(model) / "config.json").is_file()
    try:
        base = inspect_checkpoint(model).base_model if is_checkpoint else model
        tokenizer = str(resolve_model(base))
    except KitchenError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(e.exit_code) from None
    manager = TaskManager(include_path=str(SHIPPED_TASKS))
    names = [t.strip() for t in tasks.split(",") if t.strip()]
    results: dict[str, Any] = {}
    with _server(url, base, start_timeout) as server:
        for name in names:
            task = next(iter(get_task_dict([name], manager).values()))
            scoring = getattr(task, "OUTPUT_TYPE", "") in LOGLIKELIHOOD_TYPES
            use_chat = chat and not scoring
            endpoint = "chat/completions" if use_chat else "completions"
            model_args: dict[str, Any] = {"base_url": f"{server}/v1/{endpoint}", "model": model}
            if not use_chat:
                model_args |= {"tokenizer_backend": "huggingface", "tokenizer": tokenizer}
            out = lm_eval.simple_evaluate(
                model="local-chat-completions" if use_chat else "local-completions",
                model_args=model_args,
                tasks=[name],
                task_manager=manager,
                limit=limit,
                apply_chat_template=use_chat,
            )
            results[name] = out["results"][name]
    for name, metrics in results.items():
        for key, value in metrics.items():
            if isinstance(value, float) and "stderr" not in key:
                typer.echo(f"{name}\t{key.split(',')[0]}\t{value:.4f}")
    if output is not None:
        output.write_text(json.dumps(results, indent=2, default=str) + "\n")


@contextlib.contextmanager
def _server(url: str | None, base_model: str, start_timeout_s: float) -> Iterator[str]:
    """`url`, or a `kitchen serve` of `base_model` on a free loopback port for the block; one that
    dies or is not ready within `start_timeout_s` ends the command with its last log lines."""
    if url is not None:
        yield url.rstrip("/")
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    cmd = [sys.executable, "-m", "kitchen.app.cli", "serve", "--port", str(port)]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [*cmd, "--model", base_model], env=dict(os.environ), stdout=log, stderr=log
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(proc, url, log, start_timeout_s)
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log: IO[bytes], timeout_s: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        code = proc.poll()
        if code is not None:
            problem = f"kitchen serve exited ({code}) before it was ready"
        elif time.monotonic() > deadline:
            problem = f"kitchen serve was not ready within {timeout_s:g} s"
        else:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/api/v1/healthz", timeout=1).status_code == 200:
                    return
            time.sleep(0.5)
            continue
        log.seek(0)
        lines = [x.strip() for x in log.read().decode(errors="replace").splitlines() if x.strip()]
        tail = " | ".join(lines[-3:]) or "(no output)"
        typer.echo(f"error: {problem}; its last log lines: {tail}", err=True)
        raise typer.Exit(1)
