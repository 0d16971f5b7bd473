"""How the server reports failures: request mistakes as HTTP 4xx at once, failures of accepted work
as a `RequestFailedResponse` of category user or server. Never a 5xx: the SDK retries those for
minutes."""

from __future__ import annotations

from kitchen.engine.errors import KitchenError


class UserError(ValueError):
    """The request is wrong; answered with HTTP 400 (or the subclass's status) at once, with the
    subclass's OpenAI error `code` and `param` where it has them."""

    status = 400
    code: str | None = None
    param: str | None = None


class NotFound(UserError):
    status = 404


class Gone(UserError):
    status = 410


# Failures that mean "your request cannot be served as sent" rather than "the server broke".
_USER_FAILURES = (KitchenError, ValueError, TypeError, LookupError, NotImplementedError)


def error_category(error: BaseException) -> str:
    """'user' or 'server', the SDK's RequestErrorCategory values."""
    return "user" if isinstance(error, _USER_FAILURES) else "server"


def error_message(error: BaseException) -> str:
    """One line: the message, or the exception type when it has none."""
    text = " ".join(str(error).split())
    if isinstance(error, KitchenError | UserError):
        return text or type(error).__name__
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
