"""The process's HTTP client for the direct wires: one pooled ``httpx.AsyncClient`` per event loop.

Connections are kept alive and shared by every model of the process; HTTP/2 is offered when the ``h2``
package is installed (servers that speak it say so over TLS), else HTTP/1.1. A client belongs to the event
loop it was made in, so a process that runs several loops in turn (a run's stages) gets one per loop.
"""

from __future__ import annotations

import asyncio
import importlib.util

import httpx

__all__ = ["HTTP2", "Pool"]

HTTP2 = importlib.util.find_spec("h2") is not None
"""Whether HTTP/2 is offered: only when ``h2`` is installed already (it is never required)."""

# Keep-alive for as many connections as requests a run keeps in flight; no cap on open connections,
# since each model's own limiter (``max_in_flight``) bounds them.
_LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=4096, keepalive_expiry=30.0)


class Pool:
    """The pooled client of the running event loop, made on first use; ``aclose`` ends it."""

    def __init__(self) -> None:
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop or self._client.is_closed:
            self._client = httpx.AsyncClient(http2=HTTP2, limits=_LIMITS, follow_redirects=False)
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the client if it belongs to the running loop (one of a finished loop is gone with it)."""
        client, self._client = self._client, None
        if client is not None and self._loop is asyncio.get_running_loop():
            await client.aclose()
