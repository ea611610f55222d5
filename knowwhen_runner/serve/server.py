"""Run the app under uvicorn in this process, tuned for throughput (uvloop, httptools, no access log).

One worker only: faults, rate limits and stats are per-process state, and a test that injects a fault
must see it on every request. One uvloop worker already serves thousands of requests per second.

uvicorn's httptools protocol takes request headers of any size (a 56 MB header line cost the server 5 s
of CPU); ``HeadLimitedProtocol`` answers 431 past ``MAX_HEAD_BYTES`` and ends the connection.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Mapping, Sequence
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ..exceptions import KnowwhenError
from .admin_guard import admin_token_for
from .app import create_app
from .defaults import default_registry
from .encoding import BodyLimits
from .faults import FaultRule

__all__ = ["MAX_HEAD_BYTES", "HeadLimitedProtocol", "listen_socket", "run_server"]

MAX_HEAD_BYTES = 64 * 2**10
"""The most a request line and headers may take (uvicorn's h11 protocol stops at 16 KiB)."""
_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain\r\n"
    b"content-length: 49\r\nconnection: close\r\n\r\nthe request's headers are larger than 65536 bytes"
)
_LINGER_S = 0.25


class HeadLimitedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, counting the bytes of each request's head until its headers end."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head: int | None = 0  # bytes of the head so far; None once the headers are complete

    def on_message_begin(self) -> None:
        self._head = 0
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._head = None
        super().on_headers_complete()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # counted after parsing: a read that ends the headers may carry part of the body too
        if self._head is not None and not self.transport.is_closing():
            self._head += len(data)
            if self._head > MAX_HEAD_BYTES:
                self._head = None
                self._refuse()

    def _refuse(self) -> None:
        # as for a refused body: stop reading, answer, end this side, reset a moment later
        self.transport.pause_reading()
        self.transport.write(_TOO_LARGE)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        asyncio.get_running_loop().call_later(_LINGER_S, self.transport.abort)


def listen_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound to ``host:port`` as uvicorn binds one (``SO_REUSEADDR``); a port another
    process listens on raises ``KnowwhenError`` saying so, before anything claims the server started."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise KnowwhenError(
                f"port {port} on {host} is taken: another process listens there; stop it, or give --port "
                "another port"
            ) from None
        raise KnowwhenError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
    sock.set_inheritable(True)
    return sock


def run_server(
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    faults: Sequence[FaultRule] = (),
    enforce_rpm: Mapping[str, int] | None = None,
    limit_headers: bool = True,
    aliases: Mapping[str, str] | None = None,
    log_level: str = "warning",
    max_body_bytes: int = BodyLimits.max_bytes,
    body_timeout_s: float = BodyLimits.timeout_s,
    max_files: int = 1000,
    instance: str | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Serve the reference models until interrupted (blocking); ``aliases``: more names for decision models;
    ``max_body_bytes``: the largest request body (an upload is one), ``body_timeout_s``: the time it may
    take to arrive; ``max_files``: how many uploaded files the server keeps at once; ``instance``: the id
    ``/health`` answers with (a run's, for the run to know its own server); ``sock``: bound already."""
    registry = default_registry()
    for name, target in (aliases or {}).items():
        if target not in registry.decision:
            raise SystemExit(f"--alias {name}={target}: no decision model named {target!r}")
        registry.add_decision_alias(name, target)
    token, announce = admin_token_for(host)
    if announce:
        print(f"knowwhen serve: {announce}", flush=True)
    app = create_app(
        faults=list(faults),
        enforce_rpm=dict(enforce_rpm or {}),
        limit_headers=limit_headers,
        registry=registry,
        admin_token=token,
        body_limits=BodyLimits(max_body_bytes, body_timeout_s),
        max_files=max_files,
        instance=instance,
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="uvloop",
        http=HeadLimitedProtocol,
        lifespan="off",
        access_log=False,
        log_level=log_level,
        timeout_keep_alive=30,
        timeout_graceful_shutdown=5,  # a stop signal waits this long for requests in flight, then ends them
        backlog=4096,
    )
    uvicorn.Server(config).run(sockets=None if sock is None else [sock])
