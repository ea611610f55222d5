"""The viewer's web app: one page (plain HTML, vanilla JS, inline CSS) and the JSON endpoints it polls.

Served on loopback by default. Bound to any other address it asks for a token — generated at start,
printed once — on every request (``?token=`` or the ``X-Knowwhen-Token`` header; the page passes on the
one in its own address). On loopback every request must name a loopback host (``Host``), so a page
that rebinds its own name to 127.0.0.1 cannot read a run. Every endpoint is a GET: a request that sends
a body is refused (413) before routing, its body unread. No endpoint returns a config's secrets: the config is never sent, only ids.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from ..jsonio import dumps
from ..serve.encoding import declared_length, reply_unread
from .compare import flips as two_runs
from .data import RunData
from .live import live_view, spend_view
from .page import PAGE
from .questions import QuestionFilter, question_detail, question_page

__all__ = ["TOKEN_HEADER", "is_loopback", "new_token", "viewer_app"]

TOKEN_HEADER = "X-Knowwhen-Token"
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def is_loopback(host: str) -> bool:
    return host in _LOOPBACK or host.startswith("127.")


def new_token() -> str:
    return secrets.token_urlsafe(24)


def _json(data: Any, status: int = 200) -> Response:
    # orjson: the question list of a large run is tens of MB, several times faster than json.dumps
    return Response(
        dumps(data), status_code=status, media_type="application/json", headers={"Cache-Control": "no-store"}
    )


def viewer_app(data: RunData, *, token: str | None = None, other: RunData | None = None) -> Starlette:
    """The app over one run (and ``other``, to compare with); with ``token`` every request must carry it."""

    async def page(_request: Request) -> Response:
        return HTMLResponse(PAGE, headers={"Cache-Control": "no-store"})

    async def live(_request: Request) -> Response:
        return _json(await live_view(data))

    async def questions(request: Request) -> Response:
        return _json(await question_page(data, QuestionFilter.from_params(request.query_params)))

    async def spend(_request: Request) -> Response:
        return _json(await spend_view(data))

    async def question(request: Request) -> Response:
        q = request.query_params
        found = await question_detail(data, q.get("scenario", ""), q.get("model", ""), q.get("qhash", ""))
        return _json(found) if found is not None else _json({"error": "no such question"}, 404)

    async def episodes(_request: Request) -> Response:
        return _json({"rows": await data.episodes()})

    async def episode(request: Request) -> Response:
        found = await data.episode(request.query_params.get("id", ""))
        return _json(found) if found is not None else _json({"error": "no such episode"}, 404)

    async def flips(_request: Request) -> Response:
        if other is None:
            return _json({"error": "no second run: start the viewer with --compare OTHER_RUN"}, 404)
        return _json(await two_runs(data, other))

    app = Starlette(
        routes=[
            Route("/", page),
            Route("/api/live", live),
            Route("/api/spend", spend),
            Route("/api/questions", questions),
            Route("/api/question", question),
            Route("/api/episodes", episodes),
            Route("/api/episode", episode),
            Route("/api/flips", flips),
        ]
    )
    app.add_middleware(_AccessCheck, token=token)
    return app


def _host_name(host: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:8780`` → ``::1``)."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def _names_loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class _AccessCheck:
    """Refuse (403), before any route: with a token, every request without it; without one (loopback),
    every request whose Host is not a loopback name, as a page of another site that renamed its own
    address to 127.0.0.1 (DNS rebinding) sends that site's name. A request with a body is refused
    unread (413, or 403 when it is refused anyway)."""

    def __init__(self, app: Callable[..., Awaitable[None]], token: str | None) -> None:
        self.app, self.token = app, token

    def _refusal(self, request: Request) -> str | None:
        if self.token is None:
            if _names_loopback(_host_name(request.headers.get("host", "").lower())):
                return None
            return "this viewer answers only at a loopback address (127.0.0.1 or localhost)"
        given = request.query_params.get("token") or request.headers.get(TOKEN_HEADER) or ""
        if hmac.compare_digest(given.encode(), self.token.encode()):
            return None
        return "this viewer needs its token: open the address printed when it started"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            text = self._refusal(Request(scope))
            if declared_length(dict(scope.get("headers", ()))) != 0:
                status, text = (403, text) if text is not None else (413, "the viewer takes no request body")
                await reply_unread(
                    send, status, [(b"content-type", b"text/plain; charset=utf-8")], text.encode()
                )
                return
            if text is not None:
                await Response(text, status_code=403, media_type="text/plain")(scope, receive, send)
                return
        await self.app(scope, receive, send)
