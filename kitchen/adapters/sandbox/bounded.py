"""Bounded concurrency shared by the adapters: a blocking `run` and an awaitable `run_async`.

Each adapter's work is blocking (a supervised subprocess, an HTTP request), so `run_async` hands it
to the adapter's own thread pool of `max_concurrency` workers: an RL env may await hundreds of
runs at once and at most `max_concurrency` execute, whatever event loop or thread calls. Direct
`run` calls from other threads share the same bound through a semaphore.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from concurrent.futures import ThreadPoolExecutor

from kitchen.ports.sandbox import ExecutionResult, Limits, RunRequest, SandboxPort


class BoundedSandbox(SandboxPort):
    """Base for adapters: subclasses implement `_execute`; callers use `run` / `run_async`."""

    def __init__(self, max_concurrency: int, limits: Limits | None = None) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency is {max_concurrency}; expected at least 1")
        self.max_concurrency = max_concurrency
        self.default_limits = limits or Limits()
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def _execute(
        self, program: str, language: str, stdin: str, files: dict[str, str], limits: Limits
    ) -> ExecutionResult:
        raise NotImplementedError

    def run_request(self, request: RunRequest) -> ExecutionResult:
        """Run one program and block until its verdict."""
        files, limits = dict(request.files or {}), request.limits or self.default_limits
        with self._slots:
            return self._execute(request.program, request.language, request.stdin, files, limits)

    async def run_request_async(self, request: RunRequest) -> ExecutionResult:
        """Run one program on the adapter's pool; at most `max_concurrency` run at a time."""
        call = functools.partial(self.run_request, request)
        return await asyncio.get_running_loop().run_in_executor(self._executor(), call)

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="sandbox")
            return self._pool

    def close(self) -> None:
        """Stop the worker threads (runs in flight finish first)."""
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None
