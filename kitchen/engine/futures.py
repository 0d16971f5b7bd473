"""The future every port method returns: `.result()` from sync code, `await` from async code.

Mirrors the Tinker SDK's APIFuture so a recipe written against one runs against the other.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable, Generator
from typing import Any, Generic, TypeVar

T = TypeVar("T")
U = TypeVar("U")


class APIFuture(Generic[T]):
    """A handle on work submitted to a backend, backed by a `concurrent.futures.Future`."""

    def __init__(
        self, inner: concurrent.futures.Future[T], sources: tuple[APIFuture[Any], ...] = ()
    ) -> None:
        self._inner = inner
        # Futures this one was derived from (map, gather): collecting this result collects theirs,
        # so a backend that tracks unawaited futures sees them consumed when the caller consumes.
        self._sources = sources

    @classmethod
    def completed(cls, value: T) -> APIFuture[T]:
        inner: concurrent.futures.Future[T] = concurrent.futures.Future()
        inner.set_result(value)
        return cls(inner)

    @classmethod
    def failed(cls, error: BaseException) -> APIFuture[T]:
        inner: concurrent.futures.Future[T] = concurrent.futures.Future()
        inner.set_exception(error)
        return cls(inner)

    def done(self) -> bool:
        return self._inner.done()

    def add_done_callback(self, fn: Callable[[concurrent.futures.Future[T]], Any]) -> None:
        """Call `fn(inner future)` when the work finishes, without counting as consuming it."""
        self._inner.add_done_callback(fn)

    def result(self, timeout: float | None = None) -> T:
        value = self._inner.result(timeout)
        for source in self._sources:
            source.result()
        return value

    async def result_async(self, timeout: float | None = None) -> T:
        await asyncio.wait_for(asyncio.wrap_future(self._inner), timeout)
        return self.result()

    def __await__(self) -> Generator[Any, None, T]:
        yield from asyncio.wrap_future(self._inner).__await__()
        return self.result()

    def map(self, fn: Callable[[T], U]) -> APIFuture[U]:
        """A future of `fn(result)`, resolved when this one is."""
        out: concurrent.futures.Future[U] = concurrent.futures.Future()

        self.add_done_callback(lambda f: settle(out, lambda: fn(f.result())))
        return APIFuture(out, (self,))


def settle(out: concurrent.futures.Future[U], compute: Callable[[], U]) -> None:
    """Resolve `out` with `compute()`'s value or exception; leave it alone once cancelled.

    A future is cancelled when its waiter gave up: an asyncio task awaiting it was cancelled (the
    sibling of a failed rollout, a Ctrl-C). Nobody reads its outcome then, and setting one raises
    InvalidStateError inside a done-callback, which concurrent.futures logs as a traceback that
    buries the run's one real error line. The cancel can race this thread, hence the suppress.
    """
    if out.cancelled():
        return
    try:
        value = compute()
    except BaseException as e:  # the waiter gets any failure
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            out.set_exception(e)
        return
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        out.set_result(value)


def gather(*futures: APIFuture[Any]) -> APIFuture[tuple[Any, ...]]:
    """One future of all results, in order; fails with the first failure."""
    out: concurrent.futures.Future[tuple[Any, ...]] = concurrent.futures.Future()
    remaining = [len(futures)]

    def _done(_: Any) -> None:
        remaining[0] -= 1
        if remaining[0] == 0:
            settle(out, lambda: tuple(f._inner.result() for f in futures))

    if not futures:
        out.set_result(())
    for f in futures:
        f.add_done_callback(_done)
    return APIFuture(out, tuple(futures))
