"""`kitchen serve`: the local engine behind the Tinker HTTP protocol (mounted by kitchen/app/cli.py)."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

from kitchen.app import rank_flags
from kitchen.app.rank_flags import NnodesOpt, NodeRankOpt, NprocOpt, RdzvEndpointOpt

API_KEY_ENV = "KITCHEN_SERVE_API_KEY"


def command(
    host: Annotated[
        str, typer.Option("--host", help="Address to bind; loopback by default")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="TCP port")] = 8000,
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model", help="Base model to load at start-up (repeatable); others load on first use"
        ),
    ] = None,
    require_key: Annotated[
        bool,
        typer.Option(
            "--require-key",
            help=f"Refuse requests (every route, health included) without an X-API-Key header (and, if ${API_KEY_ENV} is set, a different one)",
        ),
    ] = False,
    checkpoint_dir: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint-dir", help="Where checkpoints live (default: kitchen cache/serve)"
        ),
    ] = None,
    allow_checkpoint_dir: Annotated[
        list[Path] | None,
        typer.Option(
            "--allow-checkpoint-dir",
            help="A folder (repeatable) besides --checkpoint-dir that clients may load checkpoints from",
        ),
    ] = None,
    max_body_mb: Annotated[
        float, typer.Option("--max-body-mb", min=0.001, help="Largest request body accepted (MiB)")
    ] = 256.0,
    seed: Annotated[int, typer.Option("--seed", help="Engine seed (LoRA init, sampling)")] = 0,
    device: Annotated[str, typer.Option("--device", help="auto | cpu | cuda")] = "auto",
    dtype: Annotated[str, typer.Option("--dtype", help="auto | float32 | bfloat16")] = "auto",
    threads: Annotated[
        int, typer.Option("--threads", min=1, help="torch threads in the server process")
    ] = 1,
    activation_checkpointing: Annotated[
        str,
        typer.Option(
            "--activation-checkpointing",
            help="auto | on | off: recompute activations in backward (auto: when a pass would not "
            "fit otherwise)",
        ),
    ] = "auto",
    packing: Annotated[
        bool,
        typer.Option(
            "--packing/--no-packing", help="Pack micro-batch rows end to end instead of padding"
        ),
    ] = False,
    context_length: Annotated[
        int | None,
        typer.Option(
            "--context-length",
            min=1,
            help="Positions the models take, past their trained context by rescaling the RoPE",
        ),
    ] = None,
    rope_scaling: Annotated[
        str, typer.Option("--rope-scaling", help="yarn | linear: how --context-length rescales")
    ] = "yarn",
    sampler: Annotated[
        str,
        typer.Option(
            "--sampler", help="local | vllm: what samples (vllm: a vLLM server; docs/sampling.md)"
        ),
    ] = "local",
    vllm_url: Annotated[
        list[str] | None,
        typer.Option(
            "--vllm-url",
            help="--sampler vllm: a running vLLM server (repeatable); none: Kitchen starts one",
        ),
    ] = None,
    vllm_max_lora_rank: Annotated[
        int,
        typer.Option(
            "--vllm-max-lora-rank",
            min=1,
            help="--sampler vllm: the largest LoRA rank a tenant may train (vLLM fixes it when it "
            "starts)",
        ),
    ] = 32,
    vllm_gpu_memory_utilization: Annotated[
        float | None,
        typer.Option(
            "--vllm-gpu-memory-utilization",
            help="--sampler vllm on one GPU: the share of the card the vLLM it starts may take "
            "(the trainer gets the rest; docs/sampling.md)",
        ),
    ] = None,
    base_quantization: Annotated[
        str,
        typer.Option(
            "--base-quantization",
            help="none | nf4: hold base models in 4 bits under LoRA (bitsandbytes; full "
            "fine-tuning is refused)",
        ),
    ] = "none",
    spread_sampling: Annotated[
        bool,
        typer.Option(
            "--spread-sampling/--no-spread-sampling",
            help="--nproc N > 1: each rank decodes a share of the sample requests (else rank 0 "
            "decodes them all; docs/distributed.md)",
        ),
    ] = False,
    session_timeout: Annotated[
        float,
        typer.Option(
            "--session-timeout",
            min=1.0,
            help="Seconds without a heartbeat before a session ends and its queued work is dropped "
            "(the SDK beats every 10 s; raise it where a loaded client may miss beats)",
        ),
    ] = 30.0,
    log_level: Annotated[str, typer.Option("--log-level", help="uvicorn log level")] = "warning",
    nproc: NprocOpt = 1,
    nnodes: NnodesOpt = 1,
    node_rank: NodeRankOpt = 0,
    rdzv_endpoint: RdzvEndpointOpt = None,
) -> None:
    """Serve the local engine over the Tinker SDK 0.38.0 protocol (point TINKER_BASE_URL here)."""
    from rich.console import Console

    from kitchen.engine.errors import KitchenError

    err = Console(stderr=True)
    share = vllm_gpu_memory_utilization
    if share is not None and not 0 < share <= 1:
        err.print(
            f"[red]error:[/red] --vllm-gpu-memory-utilization {share}: expected a share in (0, 1]",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(2)
    try:
        launch = rank_flags.Launch(nproc, nnodes, node_rank, rdzv_endpoint)
    except KitchenError as e:
        err.print(f"[red]error:[/red] {e}", highlight=False, soft_wrap=True)
        raise typer.Exit(e.exit_code) from None
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ModuleNotFoundError as e:
        err.print(f"[red]error:[/red] kitchen serve needs {e.name}: pip install 'kitchen[serve]'")
        raise typer.Exit(2) from None
    code = rank_flags.start(launch)
    if code is not None:
        # Stopping the server is how it ends: as one process, it ends well when its ranks did.
        raise typer.Exit(0 if code - 128 in (signal.SIGINT, signal.SIGTERM) else code)
    from kitchen.serve import ServeSettings, serve
    from kitchen.serve.settings import LOOPBACK

    if checkpoint_dir is None:
        from kitchen.adapters.local import kitchen_cache_dir

        checkpoint_dir = kitchen_cache_dir() / "serve"
    settings = ServeSettings(
        host=host,
        port=port,
        preload=list(model) if model is not None else ["kitchen/tiny-llama"],
        require_key=require_key,
        api_key=os.environ.get(API_KEY_ENV) or None,
        checkpoint_dir=checkpoint_dir,
        allowed_checkpoint_dirs=[d.expanduser().resolve() for d in allow_checkpoint_dir or []],
        max_body_bytes=int(max_body_mb * 2**20),
        seed=seed,
        device=device,
        dtype=dtype,
        threads=threads,
        activation_checkpointing=activation_checkpointing,
        packing=packing,
        context_length=context_length,
        rope_scaling=rope_scaling,
        sampler=sampler,
        vllm_urls=list(vllm_url or []),
        vllm_max_lora_rank=vllm_max_lora_rank,
        vllm_gpu_memory_utilization=vllm_gpu_memory_utilization,
        base_quantization=base_quantization,
        spread_sampling=spread_sampling,
        session_timeout_s=session_timeout,
        log_level=log_level,
    )
    if host not in LOOPBACK and not require_key:
        err.print(
            f"[yellow]warning:[/yellow] serving on {host} without --require-key: anyone who can "
            "reach this port can train and sample"
        )
    url = f"http://{'127.0.0.1' if host == '0.0.0.0' else host}:{port}"
    err.print(
        f"kitchen serve: loading {', '.join(settings.preload) or 'no models'}; then serving on {url}\n"
        f"  export TINKER_BASE_URL={url} TINKER_API_KEY=tml-local   # checkpoints in {checkpoint_dir}",
        highlight=False,
    )
    # Once shut down, uvicorn raises the signal that stopped it again: a SIGTERM would then end
    # this process before its exit handlers ran (rank 0 of --nproc N says stop to the others in
    # one). As Ctrl-C, it ends the command.
    main = threading.current_thread() is threading.main_thread()  # signals are the main thread's
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler) if main else None
    try:
        serve(settings)
    except KeyboardInterrupt:
        pass
    except Exception as e:
        if not isinstance(e, KitchenError):
            raise
        err.print(f"[red]error:[/red] {e}", highlight=False, soft_wrap=True)
        raise typer.Exit(e.exit_code) from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
