"""SDK futures as kitchen futures, and SDK exceptions as one-line BackendErrors.

The SDK's futures resolve on its own event loop thread; each exposes its `concurrent.futures.Future`
(`.future()`), which kitchen's APIFuture wraps, so `.result()` and `await` both work from any
thread or loop without the SDK's "sync call from async context" warnings.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from kitchen.adapters.tinker.credentials import scrub
from kitchen.engine.errors import BackendError, KitchenError
from kitchen.engine.futures import APIFuture, settle

T = TypeVar("T")


def backend_error(what: str, error: BaseException, api_key: str | None = None) -> BaseException:
    """A BackendError for `error` raised by the SDK during `what`; kitchen's own errors pass."""
    if isinstance(error, KitchenError):
        return error
    import tinker

    if isinstance(error, tinker.AuthenticationError | tinker.PermissionDeniedError):
        message = (
            f"the service refused the API key (HTTP {error.status_code}); check TINKER_API_KEY"
        )
    elif isinstance(error, tinker.RequestFailedError):
        message = f"{error.category.value} error: {_first_part(str(error))}"
    elif isinstance(error, tinker.APIStatusError):
        message = f"HTTP {error.status_code}: {_detail(error)}"
    elif isinstance(error, tinker.APIConnectionError):
        message = f"connection failed: {error}"
    else:
        message = f"{type(error).__name__}: {error}"
    one_line = " ".join(scrub(message, api_key).split())
    return BackendError(f"tinker {what}: {one_line}")


class RequestFailureToDebug(logging.Filter):
    """Demotes the SDK's "Request failed with non-retryable error: ..." to DEBUG: the same failure
    reaches kitchen as the request's failed future, which kitchen reports as one BackendError line
    naming the call (or drops, for a request whose waiter was cancelled). Left at ERROR, each
    failed request of a run adds a line of its own before kitchen's."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("Request failed with non-retryable error"):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True


def quiet_request_failures() -> None:
    """Install RequestFailureToDebug on the SDK's retry logger (once per process)."""
    logger = logging.getLogger("tinker.lib.retry_handler")
    if not any(isinstance(f, RequestFailureToDebug) for f in logger.filters):
        logger.addFilter(RequestFailureToDebug())


def _first_part(message: str) -> str:
    # "Request failed: <why> for self.request_id=... and expected type ..." -> "<why>"
    text = message.removeprefix("Request failed: ")
    return text.split(" for self.request_id=")[0]


def _detail(error: Any) -> str:
    body = getattr(error, "body", None)
    if isinstance(body, dict) and body.get("detail"):
        return str(body["detail"])
    return str(getattr(error, "message", error))


def call(submit: Callable[[], T], what: str, api_key: str | None = None) -> T:
    """Run an SDK call; what it raises at once (e.g. the session's first contact with the service
    is synchronous) becomes a BackendError like a failed future's."""
    try:
        return submit()
    except Exception as e:
        raise backend_error(what, e, api_key) from e


def wrap(submit: Callable[[], Any], what: str, api_key: str | None = None) -> APIFuture[Any]:
    """A kitchen APIFuture of the SDK APIFuture that `submit()` returns. Cancelling it (its
    awaiting task was cancelled) cancels the SDK's future, which stops the work on the service."""
    source: concurrent.futures.Future[Any] = call(submit, what, api_key).future()
    out: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def outcome(f: concurrent.futures.Future[Any]) -> Any:
        if f.cancelled():
            raise BackendError(f"tinker {what}: cancelled")
        error = f.exception()
        if error is not None:
            raise backend_error(what, error, api_key)
        return f.result()

    source.add_done_callback(lambda f: settle(out, lambda: outcome(f)))
    out.add_done_callback(lambda f: f.cancelled() and source.cancel())
    return APIFuture(out)


def wait(submit: Callable[[], Any], what: str, api_key: str | None = None) -> Any:
    """Block for the SDK future `submit()` returns (client creation); failures -> BackendErrors."""
    future = call(submit, what, api_key)
    try:
        return future.future().result()
    except Exception as e:
        raise backend_error(what, e, api_key) from e
