"""Verifiers 0.4 environments (`verifiers.v1`) as Kitchen agent rollouts.

A v1 env plays one episode as: its harness (the agent program) sends chat calls to a
per-rollout interception server on 127.0.0.1, which records the trace and forwards each call to
a model `Client`; the task's `@vf.reward`s then score the trace. Kitchen keeps all of that and
changes two things:

- the model client is the rollout's own `openai.AsyncOpenAI` (the gateway's in-process client,
  or its HTTP one): `GatewayModelClient` posts each call's native body to the same route on it,
  so the gateway records every call under the rollout's address;
- the default harness is `KitchenChatHarness` (id `kitchen-chat`), a chat loop run in this
  process (verifiers' harness contract allows it: its calls still go through the interception
  endpoint). verifiers' own harnesses (`null`, `bash`, ...) run a uv-script program, which
  needs `uv` on PATH and a download of that program's packages on first use; they stream, so
  the model client relays streams too.

verifiers 0.4's `Env` takes its interception only from `Env.serving()`; `play_episode` enters
that and then wraps the interception it made (`Env._interception`, the one private attribute
touched) so each session's model client is the rollout's.
"""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import httpx
import openai
import verifiers.v1 as vf
from verifiers.v1.clients.base import join_url
from verifiers.v1.clients.client import RelayReply
from verifiers.v1.dialects.chat import message_to_wire
from verifiers.v1.errors import model_error
from verifiers.v1.interception import Interception, Slot

import cookbook.envs.verifiers_reverse_text  # noqa: F401 (the bundled taskset's id resolves)
from kitchen.ports.agents import POLICY_MODEL
from train_core.agents.dataset import AgentTasks
from train_core.rl.types import RLEnvContext

HARNESS_ID = "kitchen-chat"
"""The in-process chat harness's verifiers plugin id."""

__all__ = ["KitchenChatHarness"]  # what verifiers' plugin loader reads for `kitchen-chat`


class KitchenChatHarnessConfig(vf.HarnessConfig):
    """The kitchen-chat harness has no knobs of its own."""


class KitchenChatHarness(vf.Harness[KitchenChatHarnessConfig]):
    """A chat program run in this process: one chat call per segment on the conversation so far
    (the task's prompt, then on resume the accreted conversation), no tools. Sampling is the
    run's: the interception imposes the rollout's model and sampling on every call."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
    ) -> vf.ProgramResult:
        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        else:
            messages += [message_to_wire(m) for m in prompt or []]
        async with openai.AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=0) as client:
            await client.chat.completions.create(model=ctx.model, messages=messages)  # type: ignore[arg-type]
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


# verifiers resolves a harness id by importing a top-level module of that name; this module is
# that module for `kitchen-chat` once imported.
sys.modules.setdefault(HARNESS_ID.replace("-", "_"), sys.modules[__name__])


class GatewayModelClient(vf.Client):
    """verifiers' model client over a Kitchen rollout's `openai.AsyncOpenAI`: each call's body
    (already carrying the rollout's model and sampling) goes to the dialect's route on that client,
    and the gateway's answer comes back to the harness as it was sent (a streamed one as its SSE
    events, read whole first)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def get_response(
        self,
        dialect: Any,
        body: dict[str, Any],
        sampling: vf.SamplingConfig,
        session_id: str | None = None,
        turn: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> vf.Response:
        raw = (await self._post(dialect, body)).json()
        response: vf.Response = dialect.parse_response(dialect.validate_response(raw))
        response.raw = raw
        return response

    async def relay(
        self,
        dialect: Any,
        body: dict[str, Any],
        session_id: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> RelayReply:
        reply = await self._post(dialect, body)

        async def events() -> AsyncIterator[bytes]:
            start = 0
            for end in _SSE_EVENT_END.finditer(reply.content):
                yield reply.content[start : end.end()]
                start = end.end()
            if reply.content[start:].strip():
                yield reply.content[start:]

        async def close() -> None:
            return None

        content_type = reply.headers.get("content-type", "text/event-stream")
        return RelayReply(content_type=content_type, chunks=events(), close=close)

    async def _post(self, dialect: Any, body: dict[str, Any]) -> httpx.Response:
        """The gateway's whole answer to `body` on the dialect's route; its error as verifiers'
        ProviderError (the harness's SDK retries 5xx, not 4xx)."""
        url = join_url(str(self.client.base_url), dialect.upstream_path)
        try:
            reply: httpx.Response = await self.client.post(url, body=body, cast_to=httpx.Response)
        except openai.APIStatusError as e:
            raise model_error(
                f"gateway {e.status_code}: {e.response.text}", status_code=e.status_code
            ) from e
        except openai.APIError as e:
            raise model_error(e, status_code=503) from e
        return reply


_SSE_EVENT_END = re.compile(rb"(?>\r\n|\r|\n){2}")
"""Where one server-sent event ends (as verifiers' own relay splits them)."""


class _RolloutInterception(Interception):
    """An env's live interception whose sessions take `client` as their model client. The env
    owns `inner`'s lifecycle (Env.serving); this only acquires through it."""

    def __init__(self, inner: Interception, client: vf.Client) -> None:
        super().__init__()
        self.inner, self.client = inner, client

    async def start(self) -> None:
        return None

    @asynccontextmanager
    async def acquire(self, session: Any) -> AsyncIterator[Slot]:
        async with self.inner.acquire(session) as slot:
            session.client = self.client
            yield slot


class EpisodeError(RuntimeError):
    """A verifiers episode that did not finish ok (its first error, in one line)."""


async def play_episode(
    client: Any, task: vf.Task, *, env_config: vf.EnvConfig, sampling: vf.SamplingConfig
) -> float:
    """One episode of the env `env_config` on `task`, its model calls on `client` under the name
    `policy`; the mean reward of its trainable traces. Raises EpisodeError when the episode did
    not finish ok (the seam drops the rollout and counts it)."""
    env = vf.load_environment(env_config)
    ctx = vf.ModelContext(
        model=POLICY_MODEL,
        client=vf.EvalClientConfig(base_url=str(client.base_url), api_key_var="KITCHEN_GATEWAY"),
        sampling=sampling,
    )
    async with env.serving():
        if not isinstance(env._interception, Interception):  # a verifiers other than 0.4's
            raise EpisodeError(f"{type(env).__name__}.serving() set no interception to wrap")
        env._interception = _RolloutInterception(env._interception, GatewayModelClient(client))
        episode = await env.run_episode(task, ctx)
    if not episode.ok:
        errors = [*episode.errors, *(e for t in episode.traces for e in t.errors)]
        first = f"{errors[0].type}: {errors[0].message}" if errors else "no error recorded"
        raise EpisodeError(f"verifiers episode not ok: {' '.join(first.split())[:300]}")
    trainable = [t for t in episode.traces if t.agent is None or t.agent.trainable]
    return sum(t.reward for t in trainable) / len(trainable) if trainable else 0.0


def env_config(
    taskset_id: str,
    taskset_args: Mapping[str, Any] | None = None,
    harness_id: str = HARNESS_ID,
) -> vf.EnvConfig:
    """The env config of a taskset id (an installed verifiers taskset package), its one `agent`
    seat played by `harness_id` in the local subprocess runtime, on one host interception server."""
    return vf.resolve_env_config(
        {
            "taskset": {"id": taskset_id, **dict(taskset_args or {})},
            "agent": {"harness": {"id": harness_id}, "runtime": {"type": "subprocess"}},
            "interception": {"type": "server"},
        }
    )


@dataclass(frozen=True)
class VerifiersTasks:
    """The env dataset factory: the taskset's first `groups_per_batch * n_batches` tasks, each a
    group of `group_size` episodes of the env; no test set."""

    taskset_id: str
    groups_per_batch: int
    group_size: int
    n_batches: int
    taskset_args: Mapping[str, Any] = field(default_factory=dict)
    harness_id: str = HARNESS_ID
    max_tokens: int = 64
    temperature: float = 1.0

    def __call__(self, ctx: RLEnvContext) -> tuple[AgentTasks, None]:
        config = env_config(self.taskset_id, self.taskset_args, self.harness_id)
        taskset = vf.load_taskset(config.taskset)
        tasks = list(taskset.take(self.groups_per_batch * self.n_batches))
        sampling = vf.SamplingConfig(max_tokens=self.max_tokens, temperature=self.temperature)
        rollout = partial(play_episode, env_config=config, sampling=sampling)
        tags = (self.taskset_id,)
        return AgentTasks(rollout, tasks, self.groups_per_batch, self.group_size, tags), None
