"""The HTTP side: requests to one or more vLLM servers, from any thread, as concurrent futures.

One event loop on a thread of its own carries every request (128 in flight cost 128 sockets, not
128 threads). Requests are spread over the servers in turn. Every request has a bounded timeout;
a server that refuses a connection or does not answer in time fails the request with one line
that names it, and from then on fails every request at once (the run stops and resumes from its
last checkpoint).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import threading
from collections.abc import Callable, Sequence
from typing import Any

from kitchen.engine.errors import BackendError

RESUME_HINT = "the run stops here; rerun with --resume to continue from its last checkpoint"


class ServerPool:
    """POSTs JSON to the servers at `urls` (round robin) and to all of them (`post_all`)."""

    def __init__(
        self, urls: Sequence[str], timeout_s: float, explain: Callable[[], str] | None = None
    ) -> None:
        import httpx

        self._explain = explain  # what the server's log says, when Kitchen started it
        if not urls:
            raise BackendError("a vLLM server pool needs at least one URL")
        self.urls = [u.rstrip("/") for u in urls]
        self.timeout_s = timeout_s
        self._turn = itertools.cycle(range(len(self.urls)))
        self._turn_lock = threading.Lock()
        self._dead: str | None = None  # the first failure's line, once a server stopped answering
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="vllm-http", daemon=True
        )
        self._thread.start()
        limits = httpx.Limits(max_connections=512, max_keepalive_connections=64)
        self._client = self._run(_make_client(httpx, timeout_s, limits)).result()

    def post(self, path: str, body: dict[str, Any]) -> concurrent.futures.Future[Any]:
        """POST `body` to the next server's `path`; a future of the answer's JSON."""
        with self._turn_lock:
            url = self.urls[next(self._turn)]
        return self._run(self._post(url, path, body))

    def post_all(self, path: str, body: dict[str, Any]) -> list[concurrent.futures.Future[Any]]:
        return [self._run(self._post(url, path, body)) for url in self.urls]

    def get(self, url: str, path: str) -> Any:
        return self._run(self._get(url, path)).result()

    def call_soon(self, fn: Callable[[], Any]) -> None:
        """Run `fn` on the pool's loop (from any thread, a finalizer's too), unless it is closed."""
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(fn)

    def fire(self, path: str, body: dict[str, Any]) -> None:
        """POST to every server and forget the answers (dropping a snapshot)."""
        if self._loop.is_closed() or self._dead:
            return

        def start() -> None:
            for url in self.urls:
                self._loop.create_task(self._quiet(url, path, body))

        self.call_soon(start)

    def close(self) -> None:
        if self._loop.is_closed():
            return
        with _suppress():
            self._run(self._client.aclose()).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()

    def _run(self, coro: Any) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _post(self, url: str, path: str, body: dict[str, Any]) -> Any:
        import httpx

        if self._dead:
            raise BackendError(self._dead)
        try:
            response = await self._client.post(f"{url}{path}", json=body)
        except httpx.TimeoutException:
            raise self._died(
                f"vLLM at {url} did not answer {path} within {self.timeout_s:g} s"
            ) from None
        except httpx.HTTPError as e:
            raise self._died(
                f"vLLM at {url} stopped answering {path} ({type(e).__name__}: {e})"
            ) from None
        if response.status_code >= 500:
            raise self._died(
                f"vLLM at {url} failed {path} with HTTP {response.status_code}: "
                f"{_error_text(response)}"
            )
        if response.status_code >= 400:
            raise BackendError(
                f"vLLM refused {path} (HTTP {response.status_code}): {_error_text(response)}"
            )
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            return response.text

    async def _get(self, url: str, path: str) -> Any:
        response = await self._client.get(f"{url}{path}")
        response.raise_for_status()
        return response.json()

    async def _quiet(self, url: str, path: str, body: dict[str, Any]) -> None:
        with _suppress():
            await self._client.post(f"{url}{path}", json=body)

    def _died(self, line: str) -> BackendError:
        if self._dead is None:
            if self._explain is not None:
                line = f"{line}; {self._explain()}"
            self._dead = f"{line}; {RESUME_HINT}"
        return BackendError(self._dead)


async def _make_client(httpx: Any, timeout_s: float, limits: Any) -> Any:
    return httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=10.0), limits=limits)


def _error_text(response: Any) -> str:
    """vLLM's error message: {"error": {"message": ...}} or {"message": ...}, else the body."""
    try:
        data = response.json()
    except ValueError:
        return str(response.text)[:300]
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict) and "message" in error:
            return str(error["message"])[:300]
    return str(data)[:300]


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return True
