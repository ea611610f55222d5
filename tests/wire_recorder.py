"""A recording proxy on loopback: every request a client sends is kept as it arrived (path, headers, body
bytes) and forwarded to the real local server, whose answer goes back as it came, with any headers a test
adds (a gateway's, say). ``/status/CODE/...`` answers CODE itself, with a ``Retry-After``, for the error
statuses the server cannot be made to send. Tests compare what two clients sent for the same call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.peers.loopback import serve_on_loopback

__all__ = ["Recorded", "WireRecorder", "wire_recorder"]

_HOP = frozenset({"content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive"})


@dataclass(frozen=True)
class Recorded:
    """One request as it arrived."""

    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes


@dataclass
class WireRecorder:
    """The proxy's state: its URL, what it received, and the headers it adds to every reply."""

    upstream: str
    url: str = ""
    seen: list[Recorded] = field(default_factory=list)
    reply_headers: dict[str, str] = field(default_factory=dict)

    def take(self) -> Recorded:
        """The one request received since the last ``take`` (and forget it)."""
        assert len(self.seen) == 1, f"expected one request, got {len(self.seen)}"
        return self.seen.pop()

    def app(self) -> Starlette:
        client = httpx.AsyncClient(timeout=60)

        async def canned(request: Request) -> Response:
            await request.body()
            code = int(request.path_params["code"])
            body = b'{"error": {"message": "canned", "type": "test"}}'
            headers = {"retry-after": "3"}
            return Response(body, status_code=code, media_type="application/json", headers=headers)

        async def forward(request: Request) -> Response:
            body = await request.body()
            headers = {k.lower(): v for k, v in request.headers.items()}
            self.seen.append(Recorded(request.url.path, headers, body))
            sent = {k: v for k, v in headers.items() if k in ("content-type", "authorization")}
            upstream = await client.post(self.upstream + request.url.path, content=body, headers=sent)
            back = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP}
            return Response(
                upstream.content, status_code=upstream.status_code, headers={**back, **self.reply_headers}
            )

        return Starlette(
            routes=[
                Route("/status/{code:int}/{rest:path}", canned, methods=["POST"]),
                Route("/{rest:path}", forward, methods=["POST"]),
            ]
        )


@contextmanager
def wire_recorder(upstream: str) -> Iterator[WireRecorder]:
    """A recording proxy in front of ``upstream`` (the local server's root URL) until the block ends."""
    recorder = WireRecorder(upstream.rstrip("/"))
    with serve_on_loopback(recorder.app()) as url:
        recorder.url = url
        yield recorder
