"""The one place that decides retries: ``classify`` maps any exception to retry / retry-after /
rate-limited / fatal (or ``down``, decided by the client), and says when no HTTP response came back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from ..exceptions import ErrorKind, ProviderError

__all__ = ["Verdict", "classify", "error_headers", "retry_hint", "transport_failure"]

_UNAVAILABLE = (502, 503, 504)  # a gateway or the service itself says it cannot answer now


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do about one failed request.

    ``unreachable``: the failure says the service, not this request, is in trouble (no HTTP response,
    or 502/503/504); only these make a model *down*. A 500 is an answer: a server that refuses a
    request shape (llama.cpp's 500 on ``tool_choice: "required"``) must fail its jobs with the reason,
    not be waited for as if it were away.
    """

    kind: ErrorKind  # retry, retry_after, rate_limited or fatal; a ProviderError keeps its own (down, budget)
    wait: float | None = None
    status: int | None = None
    unreachable: bool = False


def error_headers(exc: BaseException) -> list[Any]:
    """The header mappings a failed request's response left on the exception: litellm's copy first,
    then the HTTP client's (either may be missing)."""
    sources = (
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
    )
    return [source for source in sources if source]


# Where a provider says when to come back, first match wins: milliseconds (OpenAI's), then seconds or an
# HTTP date, each as sent and as a gateway forwards it (litellm's proxy prefixes the provider's headers).
_HINTS = (
    ("retry-after-ms", 0.001),
    ("llm_provider-retry-after-ms", 0.001),
    ("retry-after", 1.0),
    ("llm_provider-retry-after", 1.0),
)


def retry_hint(value: object, scale: float = 1.0, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from one retry header's value (a number, or for seconds an HTTP date); None if
    unreadable."""
    text = str(value).strip()
    try:
        seconds = float(text) * scale
    except ValueError:
        if scale != 1.0:
            return None
        try:
            moment = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        seconds = (moment - (now or datetime.now(UTC))).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _retry_after(exc: BaseException) -> float | None:
    for source in error_headers(exc):
        for name, scale in _HINTS:
            try:
                value = source.get(name) or source.get(name.title())
            except AttributeError:
                break
            if value is not None and (wait := retry_hint(value, scale)) is not None:
                return wait
    return None


def transport_failure(exc: BaseException) -> str | None:
    """What went wrong when no HTTP response came back (refused, dropped, timed out), else None.

    litellm reports these with a made-up status (a refused connection is an "InternalServerError" with
    status 500 on the chat path), so the cause chain decides, not the class or the status.
    """
    seen: BaseException | None = exc
    for _ in range(12):
        if seen is None:
            break
        if isinstance(seen, httpx.TimeoutException) or type(seen).__name__ in ("Timeout", "TimeoutError"):
            return "timed out"
        if isinstance(seen, httpx.ConnectError | ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, httpx.RemoteProtocolError | httpx.ReadError | ConnectionResetError):
            return "connection dropped"
        seen = seen.__cause__ or seen.__context__
    return None


def classify(exc: BaseException) -> Verdict:
    """The one place that decides whether and how a failed request is retried."""
    if isinstance(exc, ProviderError):  # ours: already decided (e.g. "down")
        # another model's reply is retried like a 5xx: a gateway's primary may be back at the next try
        return Verdict("retry" if exc.kind == "other_model" else exc.kind, None, exc.status)
    if transport_failure(exc) is not None:
        return Verdict("retry", None, None, unreachable=True)  # no HTTP response: no status to report
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = None
    wait = _retry_after(exc)
    name = type(exc).__name__
    if status in (429, 529) or name == "RateLimitError":
        return Verdict("rate_limited", wait, status or 429)
    unreachable = status in _UNAVAILABLE or name in ("ServiceUnavailableError", "BadGatewayError")
    if unreachable or name in ("Timeout", "APIConnectionError", "InternalServerError"):
        return Verdict("retry_after" if wait is not None else "retry", wait, status, unreachable)
    if status is not None and (status >= 500 or status in (408, 409, 425)):
        return Verdict("retry_after" if wait is not None else "retry", wait, status)
    if status is not None and 400 <= status < 500:
        return Verdict("fatal", None, status)
    if isinstance(exc, (ValueError, KeyError, TypeError)) and name not in ("JSONDecodeError",):
        return Verdict("fatal", None, status)
    return Verdict("retry", wait, status)
