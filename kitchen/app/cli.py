"""`kitchen`: run, list, show, graph (and serve / sandbox / models where installed).

Recipe flags are generated from the recipe's Config: `--dpo-beta 0.1` sets dpo_beta. Precedence:
defaults < --preset < --config file < flags. Errors print one line; exit 2 for usage, config and
data errors, 1 for runtime failures; --debug shows the traceback.
"""

from __future__ import annotations

import sys
import traceback
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer._click import exceptions as click_errors  # typer vendors click: its own classes
from typer._click.core import ParameterSource
from typer.core import TyperGroup

from kitchen.app import rank_flags
from kitchen.app.rank_flags import NnodesOpt, NodeRankOpt, NprocOpt, RdzvEndpointOpt
from kitchen.app.rundir import LogDirExists
from kitchen.engine.errors import ConfigError, KitchenError


class OneLineErrors(TyperGroup):
    """Usage errors (a missing argument, an unknown command or option) as one line and exit 2,
    as every other usage error: `error: Missing argument 'RECIPE'.`"""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        standalone = kwargs.get("standalone_mode", True)
        kwargs["standalone_mode"] = False  # errors come back here instead of as a boxed message
        if not standalone:
            return super().main(*args, **kwargs)
        try:
            rv = super().main(*args, **kwargs)
        except click_errors.NoArgsIsHelpError as e:  # bare `kitchen`: the help, as before
            e.show()
            sys.exit(e.exit_code)
        except click_errors.ClickException as e:
            message = " ".join(e.format_message().split())
            typer.echo(f"error: {message}", err=True)
            sys.exit(e.exit_code)
        except typer.Abort:
            typer.echo("aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    cls=OneLineErrors,
    add_completion=False,
    no_args_is_help=True,
    # markdown joins a paragraph's lines before wrapping them to the terminal; "rich" keeps each
    # docstring line break, and a sentence broke mid-line wherever rich wrapped first
    rich_markup_mode="markdown",
    help="Kitchen: LLM post-training recipes as stage pipelines.",
)
console = Console()
err_console = Console(stderr=True)
EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}
STATE = {"debug": False}


def _fail(e: BaseException) -> None:
    if STATE["debug"]:
        traceback.print_exception(e)
    code = e.exit_code if isinstance(e, KitchenError) else 1
    message = str(e) if isinstance(e, KitchenError) else f"{type(e).__name__}: {e}"
    # escaped: a message is not markup (gloo's name their source file, "[/path/pair.cc:129]", which
    # rich took for a closing tag and answered with a traceback of its own)
    err_console.print(
        f"[red]error:[/red] {escape(message)}", markup=True, highlight=False, soft_wrap=True
    )
    raise typer.Exit(code)


ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="TOML, JSON or YAML file of config fields")
]
PresetOpt = Annotated[
    str | None,
    typer.Option(
        "--preset", help="Named preset, e.g. cookbook (tinker-cookbook's production values)"
    ),
]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks")]


HELP_WORDS = ("--help", "-h")


HELP_WIDTH = 100  # recipe help is prose: no wider than this, also on a wide terminal


def _help_width() -> int:
    """The terminal's width (rich reads $COLUMNS too), at most HELP_WIDTH; a pipe gets HELP_WIDTH."""
    return min(console.width, HELP_WIDTH) if console.is_terminal else HELP_WIDTH


def _recipe_help(recipe_name: str) -> None:
    """A recipe's flags with type, default, presets and help (`kitchen show`, `kitchen help`,
    `kitchen run RECIPE --help`): one entry a flag, its description wrapped beneath it, so that
    five columns of values never make a table wider than the terminal."""
    import textwrap

    from kitchen.app.resolve import get_recipe, recipe_options

    rec = get_recipe(recipe_name)
    width = _help_width()
    para = partial(textwrap.fill, width=width, break_on_hyphens=False, break_long_words=False)
    lines = [
        para(f"{rec.name}: {rec.summary()}", subsequent_indent="  "),
        para(
            f"usage: kitchen run {rec.name} [--FLAG VALUE | key=value]... "
            "[run options: kitchen run --help]",
            subsequent_indent="  ",
        ),
    ]
    if rec.presets:
        lines.append(f"presets: {', '.join(rec.presets)} (--preset NAME)")
    for opt in recipe_options(rec):
        lines.append("")
        lines.append(para(f"{', '.join(opt.flags)}  {opt.type_name} = {opt.default!r}",
                          initial_indent="  ", subsequent_indent="      "))  # fmt: skip
        body = partial(para, initial_indent="      ", subsequent_indent="      ")
        if opt.description:
            lines.append(body(opt.description))
        if opt.presets:
            values = "; ".join(f"{name}: {value!r}" for name, value in opt.presets.items())
            lines.append(body(f"presets: {values}"))
    typer.echo("\n".join(lines))


def _print_plan(resolved: Any) -> None:
    """`--dry-run`: the graph validated with the ports a run would have, the plan, the facts."""
    from kitchen.app.resolve import ALWAYS_OPEN

    resolved.workflow.validate(ports={*ALWAYS_OPEN, *resolved.ports})
    typer.echo(
        f"recipe {resolved.recipe.name}: config valid; backend {resolved.config.backend}; plan:"
    )
    typer.echo(resolved.workflow.render())
    for fact in _plan_facts(resolved.config):
        typer.echo(fact)
    if resolved.run.max_steps is not None:
        typer.echo(f"stops after {resolved.run.max_steps} steps (max_steps)")


def _plan_facts(cfg: Any) -> list[str]:
    """What a dry run knows beyond the graph: the LoRA trainable-parameter count."""
    from kitchen.app.model_dims import model_dims
    from train_core.hyperparams import lora_param_count

    if cfg.lora_rank == 0:
        return ["full fine-tuning (lora_rank 0): every parameter trains"]
    dims = model_dims(cfg.model_name)
    if dims is None:
        return [
            f"LoRA rank {cfg.lora_rank}: trainable parameters unknown (no config of "
            f"{cfg.model_name} here)"
        ]
    count = lora_param_count(dims, cfg.lora_rank)
    return [f"LoRA rank {cfg.lora_rank}: {count:,} trainable parameters ({count / 1e6:.1f}M)"]


@app.command(context_settings={**EXTRA, "help_option_names": []})
def run(
    ctx: typer.Context,
    recipe: Annotated[
        str | None, typer.Argument(help="Recipe name (see `kitchen list`)", show_default=False)
    ] = None,
    config: ConfigOpt = None,
    preset: PresetOpt = None,
    backend: Annotated[str | None, typer.Option("--backend", help="local | tinker | fake")] = None,
    log_dir: Annotated[
        Path | None, typer.Option("--log-dir", help="Run directory (default runs/RECIPE)")
    ] = None,
    if_exists: Annotated[
        str,
        typer.Option(
            "--if-exists",
            help="When the log dir exists: ask (on a terminal; else raise) | delete | resume | "
            "raise; also the key behavior_if_log_dir_exists=",
        ),
    ] = "ask",
    resume: Annotated[bool, typer.Option("--resume", help="Same as --if-exists resume")] = False,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Validate config and graph, print the plan, touch nothing"),
    ] = False,
    max_steps: Annotated[
        int | None,
        typer.Option(
            "--max-steps",
            min=1,
            help="Stop after this many training steps; also the key max_steps=",
        ),
    ] = None,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar")] = False,
    nproc: NprocOpt = 1,
    nnodes: NnodesOpt = 1,
    node_rank: NodeRankOpt = 0,
    rdzv_endpoint: RdzvEndpointOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Run a recipe. Recipe flags: `kitchen run RECIPE --help`; also key=value (dotted for nested)."""
    STATE["debug"] = debug
    try:
        if recipe in HELP_WORDS or (recipe is None and set(HELP_WORDS) & set(ctx.args)):
            typer.echo(ctx.get_help())
            return
        if recipe is None:
            raise ConfigError("kitchen run needs a RECIPE (kitchen list shows them)")
        if set(HELP_WORDS) & set(ctx.args):
            _recipe_help(recipe)
            return
        if if_exists not in ("ask", "delete", "resume", "raise"):
            raise ConfigError(
                f"--if-exists: expected ask, delete, resume or raise (got {if_exists!r})"
            )
        from kitchen.app.launch import run as run_recipe
        from kitchen.app.resolve import resolve_config

        resolved = resolve_config(recipe, config_file=config, args=ctx.args, preset=preset,
                                  backend=backend, log_dir=log_dir, default_log_dir=True)  # fmt: skip
        if dry_run:
            _print_plan(resolved)
            return
        launch = rank_flags.Launch(nproc, nnodes, node_rank, rdzv_endpoint)
        if launch.distributed and resolved.backend != "local":
            raise ConfigError(
                f"--nproc/--nnodes start ranks of the local engine; backend is {resolved.backend!r}"
            )
        code = rank_flags.start(launch)
        if code is not None:
            raise typer.Exit(code)
        # a flag typed wins over its run key (behavior_if_log_dir_exists=, max_steps=, the
        # latter in run_recipe); the flag's default counts only where no key was given
        keyed = resolved.run.if_exists
        typed = ctx.get_parameter_source("if_exists") != ParameterSource.DEFAULT
        chosen = "resume" if resume else (if_exists if typed or keyed is None else keyed)
        result = run_recipe(
            resolved,
            if_exists=chosen,  # type: ignore[arg-type]
            max_steps=max_steps,
            progress=not no_progress,
            announce=lambda line: err_console.print(line, highlight=False),
        )
        console.print(
            f"done: {result.steps} steps; run directory {resolved.log_dir}", highlight=False
        )
    except typer.Exit:
        raise
    except LogDirExists as e:
        _fail(
            ConfigError(
                f"log dir {e.log_dir} already exists; pass --if-exists resume to continue it or "
                "--if-exists delete to start over, or another --log-dir"
            )
        )
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            err_console.print("interrupted; metrics and checkpoints written so far are kept")
            raise typer.Exit(130) from None
        _fail(e)


@app.command("list")
def list_(debug: DebugOpt = False) -> None:
    """List recipes, backends and dataset stores."""
    from kitchen.app.resolve import get_recipe
    from kitchen.engine.plugins import BACKENDS, DATASET_STORES, RECIPES

    STATE["debug"] = debug
    table = Table("recipe", "what it trains", box=None)
    for name in RECIPES.names():
        try:
            table.add_row(name, get_recipe(name).summary())
        except Exception as e:  # a broken third-party entry point must not hide the others
            table.add_row(name, f"[red]failed to load: {e}[/red]")
    console.print(table)
    console.print(f"backends: {', '.join(BACKENDS.names())}", highlight=False)
    console.print(f"dataset stores: {', '.join(DATASET_STORES.names())}", highlight=False)


@app.command(context_settings=EXTRA)
def show(
    recipe: Annotated[str, typer.Argument(help="Recipe name")], debug: DebugOpt = False
) -> None:
    """Show a recipe's config fields: flag, type, default, presets, description."""
    STATE["debug"] = debug
    try:
        _recipe_help(recipe)
    except BaseException as e:
        _fail(e)


@app.command("help")
def help_(
    ctx: typer.Context,
    recipe: Annotated[str | None, typer.Argument(help="Recipe name")] = None,
    debug: DebugOpt = False,
) -> None:
    """Help on a recipe (its flags, as `kitchen show`), or on kitchen."""
    STATE["debug"] = debug
    try:
        if recipe is None:
            typer.echo(ctx.parent.get_help() if ctx.parent else ctx.get_help())
            return
        _recipe_help(recipe)
    except BaseException as e:
        _fail(e)


def _is_workflow_target(target: str) -> bool:
    """`path/to/file.py[:function]` or `package.module:function`, as opposed to a recipe name."""
    return ":" in target or target.endswith(".py")


def _load_workflow(target: str) -> Any:
    """Call the workflow factory `target` names (default function: build_workflow) and return the
    Workflow it builds."""
    import importlib
    import importlib.util

    from kitchen.engine.graph import Workflow

    where, _, func = target.partition(":") if not target.endswith(".py") else (target, "", "")
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise ConfigError(f"workflow file {path} does not exist")
        name = f"_kitchen_graph_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ConfigError(f"workflow file {path} is not a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the file executes
        spec.loader.exec_module(module)
    else:
        if "" not in sys.path and str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))  # as `python -m` does: modules of the cwd import
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as e:
            if e.name is None or not where.startswith(e.name):
                raise
            raise ConfigError(f"no module named {where!r} (from the current directory)") from None
    func = func or "build_workflow"
    factory = getattr(module, func, None)
    if not callable(factory):
        raise ConfigError(
            f"{where} has no function {func!r}; expected a function that returns a Workflow"
        )
    workflow = factory()
    if not isinstance(workflow, Workflow):
        raise ConfigError(f"{target} returned {type(workflow).__name__}, not a Workflow")
    return workflow


@app.command(context_settings=EXTRA)
def graph(
    ctx: typer.Context,
    recipe: Annotated[
        str,
        typer.Argument(
            help="Recipe name, or a workflow factory: path/to/file.py[:function] or "
            "package.module:function (default function: build_workflow)"
        ),
    ],
    config: ConfigOpt = None,
    preset: PresetOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Print a recipe's plan with the values bound from the flags, or the plan of the workflow a
    Python function builds (then also validated: exit 2 when it is invalid)."""
    STATE["debug"] = debug
    try:
        if _is_workflow_target(recipe):
            from kitchen.engine.validate import validate

            workflow = _load_workflow(recipe)
            typer.echo(workflow.render())
            validate(workflow)
            return
        from kitchen.app.resolve import resolve_config

        resolved = resolve_config(recipe, config_file=config, args=ctx.args, preset=preset)
        typer.echo(resolved.workflow.render())
    except BaseException as e:
        _fail(e)


def _mount_optional() -> None:
    """Sub-apps that live in their own modules."""
    for module, name in (
        ("kitchen.app.cli_sandbox", "sandbox"),
        ("kitchen.app.cli_models", "models"),
        ("kitchen.app.cli_serve", "serve"),
        ("kitchen.app.cli_export", "export"),
        ("kitchen.app.cli_eval", "eval"),
        ("kitchen.app.report.cli", "report"),
        ("kitchen.app.play", "play"),
    ):
        try:
            mod = __import__(module, fromlist=["app"])
        except ModuleNotFoundError as e:
            if e.name == module:
                continue
            raise
        if hasattr(mod, "app"):
            mod.app.rich_markup_mode = "markdown"
            app.add_typer(mod.app, name=name)
        elif hasattr(mod, "command"):
            app.command(name, context_settings=getattr(mod, "CONTEXT_SETTINGS", None))(mod.command)


_mount_optional()


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
