"""`kitchen eval MODEL --tasks T[,T...]`: EleutherAI lm-eval-harness through the OpenAI-compatible
endpoint of `kitchen serve` (started for the run, or --url of a running one); or, with
`--harness benchmark`, the sampled benchmarks (gsm8k, math500) over every checkpoint of a run
directory, pass@k per checkpoint appended to its eval_store.jsonl.

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
        typer.Argument(
            help="A base model name, or a sampler checkpoint folder / tinker:// path; --harness "
            "benchmark: a run directory"
        ),
    ],
    tasks: Annotated[
        str, typer.Option("--tasks", help="Comma-separated task (lm-eval) or benchmark names")
    ],
    harness: Annotated[
        str,
        typer.Option(
            "--harness",
            help="lm-eval | benchmark (MODEL: a run directory; gsm8k, math500) | inspect (MODEL: "
            "a run directory; pip_signoff, pip_tools)",
        ),
    ] = "lm-eval",
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
    num_samples: Annotated[
        int, typer.Option("--num-samples", help="benchmark: answers sampled per problem")
    ] = 4,
    k: Annotated[str, typer.Option("--k", help="benchmark: comma-separated k of pass@k")] = "1,4",
    source: Annotated[
        str, typer.Option("--source", help="benchmark: bundled (offline slices) | hub")
    ] = "bundled",
    max_tokens: Annotated[
        int, typer.Option("--max-tokens", help="benchmark: tokens per answer")
    ] = 256,
    temperature: Annotated[
        float, typer.Option("--temperature", help="benchmark: sampling temperature")
    ] = 1.0,
) -> None:
    """Score a model or checkpoint with lm-eval-harness through `kitchen serve`, or a run's
    checkpoints on sampled benchmarks (--harness benchmark)."""
    names = [t.strip() for t in tasks.split(",") if t.strip()]
    if harness in ("benchmark", "inspect"):
        settings = _benchmark_settings(num_samples, k, source, max_tokens, temperature, limit)
        _run_benchmarks(Path(model), harness, names, settings, output)
        return
    if harness != "lm-eval":
        typer.echo(
            f"error: --harness {harness!r}: expected lm-eval, benchmark or inspect", err=True
        )
        raise typer.Exit(2)
    try:
        import lm_eval
        from lm_eval.tasks import TaskManager, get_task_dict
    except ModuleNotFoundError as e:
        typer.echo(f"error: kitchen eval needs {e.name}: pip install 'kitchen[eval]'", err=True)
        raise typer.Exit(2) from None
    from kitchen.adapters.local import resolve_model
    from kitchen.adapters.local.clients.export import inspect_checkpoint
    from kitchen.engine.errors import KitchenError

    is_checkpoint = Path(model).is_dir() and not (Path(model) / "config.json").is_file()
    try:
        base = inspect_checkpoint(model).base_model if is_checkpoint else model
        tokenizer = str(resolve_model(base))
    except KitchenError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(e.exit_code) from None
    manager = TaskManager(include_path=str(SHIPPED_TASKS))
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


def _benchmark_settings(
    num_samples: int, ks: str, source: str, max_tokens: int, temperature: float, limit: int | None
) -> Any:
    from kitchen.app.eval_runner import BenchmarkSettings

    try:
        k_values = tuple(int(x) for x in ks.split(",") if x.strip())
    except ValueError:
        k_values = ()
    problem = (
        f"--k {ks!r}: expected comma-separated integers" if not k_values
        else f"--source {source!r}: expected bundled or hub" if source not in ("bundled", "hub")
        else f"--k {max(k_values)} exceeds --num-samples {num_samples}"
        if max(k_values) > num_samples or min(k_values) < 1 else None
    )  # fmt: skip
    if problem:
        typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(2)
    return BenchmarkSettings(num_samples, k_values, max_tokens, temperature, source, limit)  # type: ignore[arg-type]


def _run_benchmarks(
    run_dir: Path, harness: str, names: list[str], settings: Any, output: Path | None
) -> None:
    """Every checkpoint of `run_dir` on the benchmarks or inspect tasks `names`, with the backend
    its config.json names; new results go to its eval store (and --output), one line each here."""
    from dataclasses import asdict

    from kitchen.app.eval_runner import (
        EVAL_STORE,
        benchmark_evaluators,
        evaluate_checkpoints,
        inspect_evaluators,
    )
    from kitchen.app.launch import make_backend
    from kitchen.engine.errors import KitchenError
    from kitchen.engine.plugins import DATASET_STORES
    from kitchen.ports import BackendSettings
    from train_core.renderers import get_renderer, resolve_renderer_name

    config_path = run_dir / "config.json"
    try:
        config = json.loads(config_path.read_text())["config"]
    except (OSError, ValueError, KeyError):
        typer.echo(f"error: {config_path}: not a Kitchen run directory's config.json", err=True)
        raise typer.Exit(2) from None

    def renderer_for(record: dict[str, Any], tokenizer: Any) -> Any:
        name = record.get("renderer_name") or resolve_renderer_name(
            config["model_name"], config.get("renderer_name")
        )
        return get_renderer(name, tokenizer)

    settings_obj = BackendSettings(
        seed=int(config.get("seed", 0)), dtype=config.get("dtype", "auto")
    )
    backend = make_backend(config.get("backend", "local"), settings_obj)
    try:
        if harness == "benchmark":
            evaluators = benchmark_evaluators(names, DATASET_STORES.get("hf")(), settings)
            key = asdict(settings)
        else:  # inspect: greedy by default, one answer per sample (no pass@k)
            evaluators = inspect_evaluators(names, settings)
            key = {"harness": "inspect", "limit": settings.limit,
                   "max_tokens": settings.max_tokens, "temperature": settings.temperature}  # fmt: skip
        results = evaluate_checkpoints(run_dir, evaluators, backend, renderer_for, key)
    except KitchenError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(e.exit_code) from None
    finally:
        backend.close()
    for result in results:
        for key, value in result["metrics"].items():
            typer.echo(f"{result['checkpoint']}\t{key}\t{value:.4f}")
    typer.echo(f"{len(results)} new result(s) in {run_dir / EVAL_STORE}")
    if output is not None:
        output.write_text(json.dumps(results, indent=2) + "\n")


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
