"""What a direct request raises when the provider's answer is no reply: named and numbered as litellm's.

Each class carries the HTTP ``status_code`` and the ``response`` (its headers say when to come back), so
``retry.classify``, ``retry.error_headers`` and ``retry.transport_failure`` read it as they read litellm's
exception for the same answer; the class names are litellm's, since ``classify`` also reads names (a
timeout status is a ``Timeout``, as litellm has it). When no HTTP response came back at all, the HTTP
client's own exception (``httpx.ConnectError``, ``httpx.ReadTimeout``...) is raised as it is.

    WireError
     ├─ BadRequestError (400, 422: ``UnprocessableEntityError``)
     ├─ AuthenticationError (401), PermissionDeniedError (403), NotFoundError (404)
     ├─ RateLimitError (429)
     ├─ InternalServerError (500, and a reply that cannot be read)
     ├─ BadGatewayError (502), ServiceUnavailableError (503)
     ├─ Timeout (408, 504)
     └─ APIError (any other status; litellm's chat handler's unreadable reply, with its status)
"""

from __future__ import annotations

import httpx

__all__ = ["WireError", "failure_for", "unreadable"]

_BODY_SHOWN = 1000  # characters of an error body kept in the message (the client cuts and redacts it)


class WireError(Exception):
    """A provider's HTTP answer that is not a reply: its status and response (for the retry headers)."""

    def __init__(self, message: str, status_code: int, response: httpx.Response | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.response = response


class BadRequestError(WireError):
    pass


class UnprocessableEntityError(BadRequestError):
    pass


class AuthenticationError(WireError):
    pass


class PermissionDeniedError(WireError):
    pass


class NotFoundError(WireError):
    pass


class RateLimitError(WireError):
    pass


class InternalServerError(WireError):
    pass


class BadGatewayError(WireError):
    pass


class ServiceUnavailableError(WireError):
    pass


class Timeout(WireError):
    pass


class APIError(WireError):
    pass


_BY_STATUS: dict[int, type[WireError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    408: Timeout,
    422: UnprocessableEntityError,
    429: RateLimitError,
    500: InternalServerError,
    502: BadGatewayError,
    503: ServiceUnavailableError,
    504: Timeout,
}


def failure_for(response: httpx.Response, provider: str) -> WireError:
    """The exception for an HTTP error answer (status ≥ 400), its body's start in the message."""
    cls = _BY_STATUS.get(response.status_code, APIError)
    text = response.text[:_BODY_SHOWN]
    return cls(f"{provider.capitalize()}Exception - {text}", response.status_code, response)


def unreadable(response: httpx.Response, provider: str, why: str, *, keep_status: bool = False) -> WireError:
    """The exception for a success status whose body is not a reply of the wire: a 500, as litellm has
    it, or (``keep_status``: litellm's own chat handler, ``hosted_vllm/``) an error of the status sent."""
    message = f"{provider.capitalize()}Exception - unexpected reply: {why}"
    if keep_status:
        return APIError(message, response.status_code, response)
    return InternalServerError(message, 500, response)
