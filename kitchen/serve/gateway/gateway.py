"""The agent gateway (kitchen.ports.agents.AgentGateway): OpenAI-compatible routes over the policy's
sampling client, every call addressed to a rollout recorded in a CallLog.

    gateway = open_gateway(policy=sampling_client, version=0, port=None)
    client = gateway.client("rollout-7")            # openai.AsyncOpenAI, in-process, no socket
    await client.chat.completions.create(model="policy", messages=[...], tools=[...])
    gateway.set_policy(new_sampling_client, 1)       # after an optim step
    meter = gateway.limit("rollout-7", budgets)      # its calls past these budgets are refused
    records = gateway.take("rollout-7")              # list[CallRecord], in the order they started
    gateway.close()

The same object serves `kitchen serve`'s OpenAI routes (with its catalog of base models and
checkpoints beside `policy`) and a run's own gateway (policy only). docs/agents.md tells the
addresses, the record and the multi-turn rule.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from kitchen.ports.agents import POLICY_MODEL
from kitchen.serve.errors import NotFound
from kitchen.serve.gateway.addresses import RolloutPaths, rollout_path
from kitchen.serve.gateway.policy import PolicySlot
from kitchen.serve.gateway.rollouts import RolloutBook
from kitchen.serve.openai.models import Lease
from train_core.agents.budgets import RolloutMeter

if TYPE_CHECKING:
    from kitchen.serve.gateway.rollouts import RolloutCalls
    from kitchen.serve.openai.models import ModelCatalog
    from train_core.agents import CallRecord

IN_PROCESS_URL = "http://kitchen-gateway"
"""The origin in-process clients name (no socket is opened for it)."""


class Gateway:
    """kitchen.ports.agents.AgentGateway, and the ModelSource of the OpenAI routes.

    `renderer`: the run's chat format (a train_core Renderer or its name; None: the base model's
    recommended one). `context`: the model's context length where the sampling client does not
    tell it. `catalog`: other model names to serve (kitchen serve's base models and checkpoints).
    `default_policy`: opens (sampling client, version, base model) for `policy` when asked for
    before any set_policy (kitchen serve's base model); None: such a call is refused.
    """

    def __init__(
        self,
        *,
        renderer: Any = None,
        context: int | None = None,
        catalog: ModelCatalog | None = None,
        default_policy: Callable[[], tuple[Any, int, str]] | None = None,
    ) -> None:
        self.book = RolloutBook()
        self.policy = PolicySlot(POLICY_MODEL, renderer, context)
        self._catalog = catalog
        self._default_policy = default_policy
        self._default_lock = threading.Lock()
        self._app: Any = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._url: str | None = None

    # -- kitchen.ports.agents.AgentGateway ---------------------------------------------------------

    def client(self, address: str) -> Any:
        """An `openai.AsyncOpenAI` whose calls go to this gateway's routes in-process (httpx's ASGI
        transport: no socket, the same routes and records), addressed to `address`. A streamed
        answer arrives whole once sampled (the transport buffers the body)."""
        import httpx
        import openai

        http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url=IN_PROCESS_URL, timeout=None
        )
        return openai.AsyncOpenAI(
            base_url=IN_PROCESS_URL + _quoted(address),
            api_key="kitchen",
            http_client=http,
            max_retries=0,
        )

    def base_url(self, address: str) -> str | None:
        """…/rollouts/<address>/v1 on the gateway's port; None when it listens on none."""
        return None if self._url is None else self._url + _quoted(address)

    def set_policy(self, sampling_client: Any, version: int, base_model: str | None = None) -> None:
        """`policy` samples with these weights from now on; the previous snapshot is released
        once no call holds it. `base_model`: where the client does not tell it."""
        self.policy.set(sampling_client, version, base_model)

    def take(self, address: str) -> list[CallRecord]:
        return self.book.take(address)

    def limit(self, address: str, budgets: Any) -> RolloutMeter:
        """The calls on `address` spend `budgets` (a train_core AgentBudgets: its max_turns,
        max_sampled_tokens and max_tool_calls) until `take(address)`: a call past one is answered
        with a 400 whose code is rollout_budget_exceeded. The meter tells what the calls spent
        and the first one refused."""
        meter = RolloutMeter(
            address, budgets.max_turns, budgets.max_sampled_tokens, budgets.max_tool_calls
        )
        self.book.limit(meter)
        return meter

    def live_snapshots(self) -> int:
        return self.policy.live()

    # -- the routes' ModelSource --------------------------------------------------------------------

    async def lease(self, name: str, address: str | None) -> Lease:
        rollout = self.book.calls(address) if address else None
        if name == POLICY_MODEL:
            if self.policy.version is None and self._default_policy is not None:
                await asyncio.to_thread(self._open_default)
            model, token = self.policy.lease()
            release = _closing(rollout, lambda: self.policy.release(token))
            return Lease(model.addressed(rollout), _once(release))
        if self._catalog is None:
            raise NotFound(f"model {name!r}: this gateway serves {POLICY_MODEL!r} only")
        model, release = await asyncio.to_thread(self._catalog.lease, name)  # may load weights
        return Lease(model.addressed(rollout), _once(_closing(rollout, release)))

    def _open_default(self) -> None:
        with self._default_lock:
            if self.policy.version is None and self._default_policy is not None:
                self.policy.set(*self._default_policy())

    def names(self) -> list[str]:
        own = [POLICY_MODEL] if self.policy.version is not None or self._default_policy else []
        return [*own, *(self._catalog.names() if self._catalog is not None else [])]

    # -- serving ------------------------------------------------------------------------------------

    def add_routes(self, app: Any) -> None:
        """The OpenAI routes and the record routes on a FastAPI `app`."""
        from kitchen.serve.gateway.record_routes import add_record_routes
        from kitchen.serve.openai import add_openai_routes

        add_openai_routes(app, self)
        add_record_routes(app, self.book)

    @property
    def app(self) -> Any:
        """The gateway's own ASGI app (a run's gateway; kitchen serve mounts the routes on its)."""
        if self._app is None:
            from fastapi import FastAPI

            app = FastAPI(title="kitchen gateway", docs_url=None, redoc_url=None)
            self.add_routes(app)
            self._app = RolloutPaths(app)
        return self._app

    def listen(self, port: int = 0, host: str = "127.0.0.1") -> str:
        """Serve the app over HTTP on `host:port` (0: a free port) in a thread; its URL."""
        import uvicorn

        from kitchen.serve import _free_port

        if self._server is not None:
            raise RuntimeError(f"the gateway already listens on {self._url}")
        port = port or _free_port()
        config = uvicorn.Config(self.app, host=host, port=port, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, name="kitchen-gateway", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the agent gateway did not start on {host}:{port}")
            time.sleep(0.02)
        self._url = f"http://{host}:{port}"
        return self._url

    def close(self) -> None:
        """Stop listening (if it did); records and the policy are dropped."""
        if self._server is not None:
            self._server.should_exit = True
            if self._thread is not None:
                self._thread.join(30)
        self._server = self._thread = self._url = None
        self.policy = PolicySlot(POLICY_MODEL)

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_gateway(
    *,
    policy: Any = None,
    version: int = 0,
    renderer: Any = None,
    context: int | None = None,
    port: int | None = None,
    host: str = "127.0.0.1",
) -> Gateway:
    """A gateway for one run: `policy` (a sampling client of the run's backend, at policy version
    `version`) served as `policy`, in the run's chat format `renderer` (its tokenizer is the
    sampling client's). `port`: also listen on host:port over HTTP (0: a free port; None: only
    in-process clients). Close it with `close()` (or use it as a context manager)."""
    gateway = Gateway(renderer=renderer, context=context)
    if policy is not None:
        gateway.set_policy(policy, version)
    if port is not None:
        gateway.listen(port, host)
    return gateway


def _once(release: Callable[[], None]) -> Callable[[], None]:
    """`release`, run on the first call only (a lease is given back once)."""
    done = threading.Event()

    def once() -> None:
        if not done.is_set():
            done.set()
            release()

    return once


def _closing(rollout: RolloutCalls | None, release: Callable[[], None]) -> Callable[[], None]:
    """`release`, after closing the call's recorder (its unspent budget is given back)."""
    if rollout is None:
        return release

    def both() -> None:
        rollout.close()
        release()

    return both


def _quoted(address: str) -> str:
    rollout_path(address)  # a bad address is refused here, not as a 404 later
    return rollout_path(quote(address, safe=""))
