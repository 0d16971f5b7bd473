"""`kitchen play ENV`: a person acts as the policy in a registered env. The terminal shows the
rendered observation (the tokens the model would see, decoded); the typed answer is tokenized,
ended with the stop sequence the env asked for, and stepped; reward and metrics follow, until
the episode ends.

An ENVS entry (entry-point group `kitchen.envs`) is an env dataset factory class: a dataclass
with `groups_per_batch` and `group_size` fields, called with an RLEnvContext to give (train, test)
datasets. Its other fields are the options: `kitchen play arithmetic --max-operand 10`. A factory
whose call takes a `sandbox` (the code env) also gets the `--sandbox` adapter, opened and checked
first, closed after the episode.

An entry with a `versus(sampling_client, context, read, write)` coroutine method is a game
against a policy instead (text_arena's tic-tac-toe): the person plays one side, a sampling
client of `--model` (or of `--checkpoint`: a run's last checkpoint, a checkpoint folder, a
tinker:// path) the other, rendered in the policy's chat format."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from kitchen.engine.errors import ConfigError, DataError, KitchenError
from kitchen.workflows.common.images import readable_input

DEFAULT_MODEL = "kitchen/tiny-llama"
CONTEXT_SETTINGS = {"allow_extra_args": True, "ignore_unknown_options": True}  # env options
FIXED = {"groups_per_batch": 1, "group_size": 1, "n_batches": 1, "test_problems": 0}


def parse_options(factory: type, args: list[str]) -> dict[str, Any]:
    """`--max-operand 10` and `max_operand=10` into the factory's typed fields."""
    from pydantic import TypeAdapter, ValidationError

    if not dataclasses.is_dataclass(factory):
        raise ConfigError(
            f"env factory {factory!r} is not a dataclass; kitchen play cannot build it"
        )
    fields = {f.name: f for f in dataclasses.fields(factory) if f.name not in FIXED}
    hints = typing.get_type_hints(factory)  # field types written as strings, resolved
    known = ", ".join("--" + n.replace("_", "-") for n in fields) or "none"
    values: dict[str, Any] = {}
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if "=" in arg:
            key, text = arg.lstrip("-").split("=", 1)
        elif arg.startswith("--") and rest:
            key, text = arg[2:], rest.pop(0)
        else:
            raise ConfigError(f"unexpected argument {arg!r}; env options: {known}")
        name = key.replace("-", "_")
        if name not in fields:
            raise ConfigError(f"--{key} is not an option of this env; options: {known}")
        adapter: TypeAdapter[Any] = TypeAdapter(hints[name])
        try:
            values[name] = adapter.validate_strings(text)
        except (ValidationError, TypeError):
            try:
                values[name] = adapter.validate_python(text)
            except ValidationError as e:
                raise ConfigError(f"--{key}: {e.errors()[0]['msg']} (got {text!r})") from None
    missing = [
        n
        for n, f in fields.items()
        if n not in values
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ConfigError(
            f"this env needs {', '.join('--' + m.replace('_', '-') for m in missing)}"
        )
    present = {f.name for f in dataclasses.fields(factory)}
    return {**{k: v for k, v in FIXED.items() if k in present}, **values}


def stop_tokens(tokenizer: Any, stop: Any) -> list[int]:
    """The tokens that end a turn for this stop condition (its first stop sequence)."""
    if not stop:
        return []
    first = stop[0]
    return (
        [first]
        if isinstance(first, int)
        else list(tokenizer.encode(first, add_special_tokens=False))
    )


def _decode(tokenizer: Any, model_input: Any) -> str:
    return readable_input(tokenizer, model_input, None)[0]


FENCE = "```"


def read_answer(read: Callable[[str], str]) -> str:
    """One answer; one that opens a ``` fence (a program) goes on, line by line, until it closes."""
    lines = [read("your answer> ")]
    while lines[0].lstrip().startswith(FENCE) and sum(ln.count(FENCE) for ln in lines) % 2:
        lines.append(read("... "))
    return "\n".join(lines)


def needs_sandbox(env_factory: Any) -> bool:
    """Whether the factory builds its envs on a code sandbox (its call takes `sandbox`)."""
    return "sandbox" in inspect.signature(env_factory).parameters


async def play_episode(
    env_factory: Any,
    context: Any,
    read: Callable[[str], str],
    write: Callable[[str], None],
    sandbox: Any = None,
) -> float:
    """One episode with `read` as the policy; returns the total reward (steps plus group reward).
    `sandbox` is handed to a factory that needs one."""
    from train_core.completers import TokensWithLogprobs
    from train_core.rl.types import InitialObservationOverflow, Trajectory, Transition

    made = env_factory(context, sandbox) if needs_sandbox(env_factory) else env_factory(context)
    train, _ = await made if asyncio.iscoroutine(made) else made
    builder = train.get_batch(0)[0]
    envs = await builder.make_envs()
    env, tokenizer = envs[0], context.tokenizer
    first = await env.initial_observation()
    if isinstance(first, InitialObservationOverflow):
        raise ConfigError("the env's first observation is longer than its token budget")
    ob, stop = first
    transitions, seen, total = [], "", 0.0
    while True:
        text = _decode(tokenizer, ob)
        write(text[len(seen) :] if text.startswith(seen) else text)
        answer = read_answer(read)
        tokens = list(tokenizer.encode(answer, add_special_tokens=False)) + stop_tokens(
            tokenizer, stop
        )
        result = await env.step(tokens)
        total += result.reward
        # logs (the env's diagnostics, e.g. guess_number's secret) only once the episode is over
        shown_items = {**result.metrics, **(result.logs if result.episode_done else {})}
        shown = ", ".join(f"{k} {v}" for k, v in shown_items.items())
        write(f"\n[reward {result.reward:g}{'; ' + shown if shown else ''}]\n")
        transitions.append(
            Transition(
                ob,
                TokensWithLogprobs(tokens, None),
                result.reward,
                result.episode_done,
                result.metrics,
            )
        )
        seen = _decode(tokenizer, ob) + tokenizer.decode(tokens)
        if result.episode_done:
            break
        ob, stop = result.next_observation, result.next_stop_condition
    trajectory = Trajectory(transitions, result.next_observation)
    ((group_reward, group_metrics),) = await builder.compute_group_rewards([trajectory], envs)
    total += group_reward
    extra = "".join(f", {k} {v}" for k, v in group_metrics.items())
    write(f"episode done: total reward {total:g} (group reward {group_reward:g}{extra})\n")
    return total


def is_game(factory: Any) -> bool:
    """Whether the entry is a game against a policy (a `versus` method), not an env to act in."""
    return callable(getattr(factory, "versus", None))


def open_policy(
    training: Any, model: str | None, checkpoint: str | None
) -> tuple[Any, str, str | None]:
    """A sampling client of the policy, its base model, and the renderer its run trained in
    (None: the model's recommended one). `checkpoint` is a run directory (its last checkpoint),
    a local engine checkpoint folder, or a tinker:// path (then --model names the base)."""
    if checkpoint is None:
        base = model or DEFAULT_MODEL
        return training.create_sampling_client(base_model=base), base, None
    folder = Path(checkpoint)
    if (folder / "checkpoints.jsonl").is_file():
        from kitchen.app.eval_runner import run_checkpoints, sampling_client

        records = run_checkpoints(folder)
        if not records:
            raise DataError(f"--checkpoint {checkpoint}: the run saved no checkpoint yet")
        base = model or _run_model(folder)
        return sampling_client(training, records[-1]), base, records[-1].get("renderer_name")
    if checkpoint.startswith("tinker://"):
        if model is None:
            raise ConfigError(f"--checkpoint {checkpoint}: name its base model with --model")
        return training.create_sampling_client(model_path=checkpoint), model, None
    from kitchen.adapters.local.clients.export import inspect_checkpoint

    base = inspect_checkpoint(checkpoint).base_model
    return training.create_sampling_client(model_path=checkpoint), base, None


def _run_model(folder: Path) -> str:
    """The base model a Kitchen run trained, from its config.json."""
    config = folder / "config.json"
    saved = json.loads(config.read_text()) if config.is_file() else {}
    name = saved.get("config", {}).get("model_name")
    if not isinstance(name, str):
        raise DataError(f"{config}: names no model_name; give the run's base model with --model")
    return name


def command(
    ctx: typer.Context,
    env: Annotated[str, typer.Argument(help="Env name (registered in kitchen.envs)")],
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Model whose tokenizer renders the observation; in a game, the policy "
            f"(default {DEFAULT_MODEL})",
        ),
    ] = None,
    renderer: Annotated[str | None, typer.Option("--renderer", help="Renderer name")] = None,
    backend: Annotated[str, typer.Option("--backend", help="local | tinker | fake")] = "local",
    seed: Annotated[
        int, typer.Option("--seed", help="Which problem (the env's seed); in a game, the sampler's")
    ] = 0,
    sandbox: Annotated[
        str, typer.Option("--sandbox", help="Code envs: where programs run (local | http)")
    ] = "local",
    checkpoint: Annotated[
        str | None,
        typer.Option(
            "--checkpoint",
            help="Games (text_arena): the policy's weights: a run directory (its last "
            "checkpoint), a checkpoint folder or a tinker:// path",
        ),
    ] = None,
) -> None:
    """Play an env yourself: read the observation, type the answer, see the reward.
    Env options follow as --name value (e.g. `kitchen play guess_number --high 8`). An answer
    that opens a ``` fence (a program, for `kitchen play code --env bundled`) ends where it closes.
    A game plays you against a policy: `kitchen play text_arena --checkpoint runs/text_arena`."""
    import kitchen.app.builtins  # noqa: F401  (registers the built-in backends)
    from kitchen.app.launch import make_backend
    from kitchen.engine.plugins import DATASET_STORES, ENVS, SANDBOXES
    from kitchen.ports import BackendSettings
    from train_core.renderers import get_renderer, resolve_renderer_name
    from train_core.rl.types import RLEnvContext

    try:
        factory_cls = ENVS.get(env)
        options = parse_options(
            factory_cls, [*ctx.args, f"--seed={seed}"] if _has(factory_cls, "seed") else ctx.args
        )
        training = make_backend(backend, BackendSettings(seed=seed))
        factory = factory_cls(**options)
        if is_game(factory):
            client, base, trained_in = open_policy(training, model, checkpoint)
            tokenizer = client.get_tokenizer()
            chat = get_renderer(resolve_renderer_name(base, renderer or trained_in), tokenizer)
            game = factory.versus(client, RLEnvContext(chat, tokenizer), input, _echo)
            asyncio.run(game)
            return
        if checkpoint is not None:
            raise ConfigError(f"--checkpoint is for games against a policy; {env} is an env")
        model = model or DEFAULT_MODEL
        tokenizer = training.create_lora_training_client(model).get_tokenizer()
        chat = get_renderer(resolve_renderer_name(model, renderer), tokenizer)
        context = RLEnvContext(chat, tokenizer, DATASET_STORES.get("hf")())
        box = SANDBOXES.get(sandbox)() if needs_sandbox(factory) else None
        try:
            if box is not None and hasattr(box, "check"):
                box.check()  # a machine that cannot sandbox says so before the first answer
            asyncio.run(play_episode(factory, context, input, _echo, box))
        finally:
            if box is not None:
                box.close()
    except (EOFError, KeyboardInterrupt):
        typer.echo("\nstopped")
        raise typer.Exit(130) from None
    except KitchenError as e:  # bad options, data, or a sandbox that cannot run here
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(e.exit_code) from None


def _echo(text: str) -> None:
    typer.echo(text, nl=False)


def _has(factory: Any, name: str) -> bool:
    return dataclasses.is_dataclass(factory) and any(
        f.name == name for f in dataclasses.fields(factory)
    )
