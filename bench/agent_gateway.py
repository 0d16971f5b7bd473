"""Agent rollouts through the gateway against the same rollouts on the sampler directly.

    .venv/bin/python bench/agent_gateway.py                          # SmolLM2-135M, 32 rollouts of 2 turns
    .venv/bin/python bench/agent_gateway.py --model kitchen/tiny-llama --rollouts 8   # seconds, a smoke run

Every side runs --rollouts concurrent agent episodes of --turns chat turns on one sampler of the
base model (one shared decode batch), each episode seeded by its index:
    direct       the sampler's own `sample` on the prompt tokens the gateway recorded for the same
                 episode (no OpenAI layer: the floor)
    in_process   `openai.AsyncOpenAI` from `gateway.client(address)` (httpx's ASGI transport onto
                 the gateway's routes; no socket)
    http         the same client over the gateway's HTTP port on 127.0.0.1 (uvicorn in a thread of
                 this process, as `kitchen run` opens it for an agent recipe)
The sides sample the same prompts with the same seeds (printed: tokens sampled, and episodes equal
to the warm-up's), so each does the same work through the model; the ratio is the OpenAI layer's
cost, as sampled tokens per second (a row decoded beside other rows can move in its last bits, and
at temperature 1 a near tie then picks another token, so a side samples a few tokens more or
fewer). Each figure is the best wall time of --repeats interleaved rounds. Threads and the load
average are printed: other work changes times.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import kitchen  # noqa: F401  (chooses OpenMP's wait policy before torch loads)

QUESTION = "Name a colour and say why you like it."
FOLLOW_UP = "Now name another one."


async def _episode(client: Any, index: int, turns: int, max_tokens: int) -> list[str]:
    """One agent: `turns` chat turns, each reply appended to the conversation."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    replies = []
    for turn in range(turns):
        reply = await client.chat.completions.create(
            model="policy",
            messages=messages,
            max_tokens=max_tokens,
            temperature=1.0,
            seed=1000 * index + turn,
        )
        text = reply.choices[0].message.content or ""
        replies.append(text)
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": FOLLOW_UP}]
    return replies


async def _through(clients: list[Any], args: argparse.Namespace) -> float:
    t0 = time.perf_counter()
    await asyncio.gather(
        *(_episode(c, i, args.turns, args.max_tokens) for i, c in enumerate(clients))
    )
    return time.perf_counter() - t0


async def _direct(
    sampler: Any, prompts: list[list[Any]], args: argparse.Namespace
) -> tuple[float, list[list[tuple[int, ...]]]]:
    """The recorded prompts of every episode, turn after turn, on the sampler itself, with the
    seeds and stop tokens the gateway used; the wall time and what each call sampled."""
    from tinker import types

    async def episode(index: int, calls: list[Any]) -> list[tuple[int, ...]]:
        sampled = []
        for turn, call in enumerate(calls):
            params = types.SamplingParams(
                max_tokens=args.max_tokens,
                temperature=1.0,
                seed=1000 * index + turn,
                stop=args.stop,
            )
            response = await sampler.sample(
                types.ModelInput.from_ints(list(call.prompt_tokens)), 1, params
            )
            sampled.append(tuple(response.sequences[0].tokens))
        return sampled

    t0 = time.perf_counter()
    sampled_P = await asyncio.gather(*(episode(i, calls) for i, calls in enumerate(prompts)))
    return time.perf_counter() - t0, list(sampled_P)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--rollouts", type=int, default=32)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import torch

    from kitchen.adapters.local import create_local_backend
    from kitchen.adapters.local.model.settings import BackendSettings
    from kitchen.serve.gateway.gateway import open_gateway

    backend = create_local_backend(BackendSettings(seed=0))
    sampler = backend.create_sampling_client(base_model=args.model)
    gateway = open_gateway(policy=sampler, version=0, port=0)
    addresses = [f"bench-{i}" for i in range(args.rollouts)]
    in_process = [gateway.client(a) for a in addresses]
    import openai

    http = [openai.AsyncOpenAI(base_url=gateway.base_url(a), api_key="-") for a in addresses]

    counts: dict[str, tuple[int, int]] = {}

    async def rounds() -> dict[str, list[float]]:
        times: dict[str, list[float]] = {"direct": [], "in_process": [], "http": []}
        await _through(in_process, args)  # warm-up, and the prompts the direct side replays
        recorded = [gateway.take(a) for a in addresses]
        first = [[c.sampled_tokens for c in calls] for calls in recorded]
        args.stop = sorted(_stop_tokens(gateway))
        for _ in range(args.repeats):
            times["in_process"].append(await _through(in_process, args))
            counts["in_process"] = _episodes_and_tokens([gateway.take(a) for a in addresses], first)
            times["http"].append(await _through(http, args))
            counts["http"] = _episodes_and_tokens([gateway.take(a) for a in addresses], first)
            seconds, sampled_P = await _direct(sampler, recorded, args)
            times["direct"].append(seconds)
            counts["direct"] = _episodes_and_tokens(sampled_P, first)
        return times

    times = asyncio.run(rounds())
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"model {args.model}, {args.rollouts} rollouts x {args.turns} turns, max_tokens "
        f"{args.max_tokens}; torch threads {torch.get_num_threads()}, load average {load:.2f}"
    )
    # Sides sample a few tokens more or fewer (near ties at temperature 1), so the ratio that
    # compares like with like is sampled tokens per second; the wall-time ratio is printed beside it.
    floor = min(times["direct"])
    rate = counts["direct"][1] / floor
    for side, values in times.items():
        best = min(values)
        equal, tokens = counts[side]
        print(
            f"  {side:<11} {best:6.2f} s  {tokens} tokens sampled ({tokens / best:6.1f}/s): "
            f"{tokens / best / rate:4.2f}x direct's tokens/s, {floor / best:4.2f}x its wall time; "
            f"{equal}/{args.rollouts} episodes as the warm-up's"
        )
    gateway.close()
    backend.close()


def _episodes_and_tokens(
    sampled_P: list[list[Any]], first_P: list[list[tuple[int, ...]]]
) -> tuple[int, int]:
    """(episodes that sampled what the warm-up sampled, tokens sampled in all): the same work
    through the model on every side. A row decoded beside other rows can move in its last bits,
    and at temperature 1 a near tie then picks another token, so a few episodes may differ."""
    tokens_P = [[getattr(c, "sampled_tokens", c) for c in calls] for calls in sampled_P]
    equal = sum(a == b for a, b in zip(tokens_P, first_P, strict=True))
    return equal, sum(len(t) for calls in tokens_P for t in calls)


def _stop_tokens(gateway: Any) -> list[int]:
    """The chat format's stop tokens, as the gateway's chat route asks the sampler for them."""
    model, token = gateway.policy.lease()
    gateway.policy.release(token)
    stops = model.renderer().get_stop_sequences()
    if not all(isinstance(s, int) for s in stops):
        raise SystemExit(f"bench/agent_gateway.py: the chat format stops on strings {stops!r}")
    return list(stops)


if __name__ == "__main__":
    main()
