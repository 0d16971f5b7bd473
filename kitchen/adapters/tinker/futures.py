"""SDK futures as kitchen futures, and SDK exceptions as one-line BackendErrors.

The SDK's futures resolve on its own event loop thread; each exposes its `concurrent.futures.Future`
(`.future()`), which kitchen's APIFuture wraps, so `.result()` and `await` both work from any
thread or loop without the SDK's "sync call from async context" warnings.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any, TypeVar

from kitchen.adapters.tinker.credentials import scrub
from kitchen.engine.errors import BackendError, KitchenError
from kitchen.engine.futures import APIFuture

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
    """A kitchen APIFuture of the SDK APIFuture that `submit()` returns."""
    source: concurrent.futures.Future[Any] = call(submit, what, api_key).future()
    out: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def done(f: concurrent.futures.Future[Any]) -> None:
        if f.cancelled():
            out.set_exception(BackendError(f"tinker {what}: cancelled"))
            return
        error = f.exception()
        if error is not None:
            out.set_exception(backend_error(what, error, api_key))
            return
        out.set_result(f.result())

    source.add_done_callback(done)
    return APIFuture(out)


def wait(submit: Callable[[], Any], what: str, api_key: str | None = None) -> Any:
    """Block for the SDK future `submit()` returns (client creation); failures -> BackendErrors."""
    future = call(submit, what, api_key)
    try:
        return future.future().result()
    except Exception as e:
        raise backend_error(what, e, api_key) from e
