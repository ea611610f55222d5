"""The viewer's web app: one page (plain HTML, vanilla JS, inline CSS) and the JSON endpoints it polls.

Served on loopback by default. Bound to any other address it asks for a token — generated at start,
printed once — on every request (``?token=`` or the ``X-Knowwhen-Token`` header; the page passes on the
one in its own address). On loopback every request must name a loopback host (``Host``), so a page
that rebinds its own name to 127.0.0.1 cannot read a run. No endpoint returns a config's secrets: the config is never sent, only ids.
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
from .data import RunData
from .live import spend_view
from .page import PAGE
from .questions import QuestionFilter

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
    """The app over one run (and ``other``, to compare with); with ``token`` every request must carry it,
    without one every request must name a loopback host."""

    async def page(_request: Request) -> Response:
        return HTMLResponse(PAGE, headers={"Cache-Control": "no-store"})

    async def live(_request: Request) -> Response:
        return _json(await data.live())

    async def questions(request: Request) -> Response:
        return _json(await data.questions(QuestionFilter.from_params(request.query_params)))

    async def spend(_request: Request) -> Response:
        return _json(await spend_view(data))

    async def question(request: Request) -> Response:
        q = request.query_params
        found = await data.question(q.get("scenario", ""), q.get("model", ""), q.get("qhash", ""))
        return _json(found) if found is not None else _json({"error": "no such question"}, 404)

    async def episodes(_request: Request) -> Response:
        return _json({"rows": await data.episodes()})

    async def episode(request: Request) -> Response:
        found = await data.episode(request.query_params.get("id", ""))
        return _json(found) if found is not None else _json({"error": "no such episode"}, 404)

    async def flips(_request: Request) -> Response:
        if other is None:
            return _json({"error": "no second run: start the viewer with --compare OTHER_RUN"}, 404)
        from .compare import flips as two_runs

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
    if token is not None:
        app.add_middleware(_TokenCheck, token=token)
    else:
        app.add_middleware(_LoopbackHostCheck)
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


class _LoopbackHostCheck:
    """Without a token the viewer serves loopback only, so a page from another site that renamed its own
    address to 127.0.0.1 (DNS rebinding) is refused (403): its requests carry that site's name as Host."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            host = _host_name(Request(scope).headers.get("host", "").lower())
            if not _names_loopback(host):
                text = "this viewer answers only at a loopback address (127.0.0.1 or localhost)"
                await Response(text, status_code=403, media_type="text/plain")(scope, receive, send)
                return
        await self.app(scope, receive, send)


class _TokenCheck:
    """Refuse every request without the token (403), before it reaches a route."""

    def __init__(self, app: Callable[..., Awaitable[None]], token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            request = Request(scope)
            given = request.query_params.get("token") or request.headers.get(TOKEN_HEADER) or ""
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                text = "this viewer needs its token: open the address printed when it started"
                await Response(text, status_code=403, media_type="text/plain")(scope, receive, send)
                return
        await self.app(scope, receive, send)
