"""Request bodies: read within a size and a time limit (``BodyLimits``), and, sent with
``Content-Encoding``, zstd (the vendor SDK's choice for bodies of 1 KiB or more) or gzip, decoded with a
cap on the decoded size so a small body cannot expand without bound.
"""

from __future__ import annotations

import asyncio
import io
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

try:
    import zstandard
except ImportError:  # the server still answers plain and gzip bodies; zstd ones get a 415
    zstandard = None  # type: ignore[assignment]

__all__ = [
    "MAX_DECODED_BYTES",
    "BodyLimits",
    "BodyTimeout",
    "BodyTooLarge",
    "UndecodableBody",
    "UnsupportedEncoding",
    "declared_length",
    "decode_body",
    "read_body",
    "reply_unread",
]

MAX_DECODED_BYTES = 64 * 2**20
#: How long a connection whose body was refused unread stays open after its reply (reading nothing).
LINGER_S = 0.25


class UnsupportedEncoding(Exception):
    """The body uses a content coding this server does not decode (HTTP 415)."""


class UndecodableBody(Exception):
    """The body is not valid data in the coding it declares (HTTP 400)."""


class BodyTooLarge(Exception):
    """The body, as sent or decoded, is larger than its limit (HTTP 413)."""


class BodyTimeout(Exception):
    """The body did not arrive whole within its time limit (HTTP 408)."""


@dataclass(frozen=True)
class BodyLimits:
    """What one request may send: ``max_bytes`` of body (an upload is a body) within ``timeout_s``."""

    max_bytes: int = 16 * 2**20
    timeout_s: float = 60.0


def _zstd(data: bytes, limit: int) -> bytes:
    if zstandard is None:
        raise UnsupportedEncoding("zstd bodies need the zstandard package on the server")
    try:
        # A stream reader, not decompress(): frames need not declare their size, and the cap must hold.
        reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
        with reader:
            chunks, size = [], 0
            while size <= limit and (chunk := reader.read(min(limit + 1 - size, 2**20))):
                chunks.append(chunk)
                size += len(chunk)
    except zstandard.ZstdError as exc:
        raise UndecodableBody(f"body is not valid zstd: {exc}") from None
    return b"".join(chunks)


def _gzip(data: bytes, limit: int) -> bytes:
    inflater = zlib.decompressobj(wbits=47)  # 32 + 15: gzip or zlib header, detected
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error as exc:
        raise UndecodableBody(f"body is not valid gzip: {exc}") from None
    if not inflater.eof and len(out) <= limit:
        raise UndecodableBody("body is not valid gzip: truncated")
    return out


_DECODERS = {"zstd": _zstd, "gzip": _gzip, "x-gzip": _gzip}


def decode_body(body: bytes, content_encoding: str, limit: int = MAX_DECODED_BYTES) -> tuple[bytes, str]:
    """The body with its content codings undone (last applied, first undone), and the codings' names.

    ``identity`` is a no-op; any other unknown coding raises ``UnsupportedEncoding``.
    """
    codings = [c.strip().lower() for c in content_encoding.split(",")]
    codings = [c for c in codings if c and c != "identity"]
    for coding in reversed(codings):
        decoder = _DECODERS.get(coding)
        if decoder is None:
            raise UnsupportedEncoding(f"content encoding {coding!r} is not supported (zstd, gzip)")
        body = decoder(body, limit)
        if len(body) > limit:
            raise BodyTooLarge(f"the decoded body is larger than {limit} bytes")
    return body, ",".join(codings)


def declared_length(headers: dict[bytes, bytes]) -> int | None:
    """The body length a request declares: its ``Content-Length``, 0 without a body, None when it is sent
    in chunks of unknown total (``Transfer-Encoding``)."""
    if b"transfer-encoding" in headers:
        return None
    try:
        return max(0, int(headers.get(b"content-length", b"0")))
    except ValueError:
        return None


async def read_body(receive: Callable[[], Awaitable[dict[str, Any]]], limits: BodyLimits) -> bytes:
    """The whole request body of an ASGI request, as sent (still encoded), within ``limits``.

    Chunks are kept in a list and joined once: adding each to the bytes so far copied the body once per
    chunk, quadratic in its size (an 80 MB body held the event loop for seconds).
    """
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(limits.timeout_s):
            more = True
            while more:
                message = await receive()
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limits.max_bytes:
                    raise BodyTooLarge(
                        f"the request body is larger than this server takes ({limits.max_bytes} bytes)"
                    )
                chunks.append(chunk)
                more = message.get("more_body", False)
    except TimeoutError:
        raise BodyTimeout(f"the request body did not arrive within {limits.timeout_s:g} s") from None
    return b"".join(chunks)


async def reply_unread(
    send: Callable[[dict[str, Any]], Awaitable[None]],
    status: int,
    headers: list[tuple[bytes, bytes]],
    body: bytes,
) -> None:
    """Answer a request whose body is left unread, and end its connection without receiving the rest.

    A socket closed with data unread resets the connection, and a client still sending its body (most
    read nothing before they have sent it all) can lose the reply with the reset. So reading stops (the
    client's sends stall on a full window, at no cost here), the reply goes out followed by the end of
    this side, and the connection is reset only ``LINGER_S`` later, when the client holds the reply. The
    transport is reached as in the ``reset`` fault (uvicorn's ``send`` is a method of the cycle that
    owns it); without it, the reply asks the server to close the connection.
    """
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    closing = [] if transport is not None else [(b"connection", b"close")]
    if transport is not None:
        transport.pause_reading()
    await send({"type": "http.response.start", "status": status, "headers": [*headers, *closing]})
    await send({"type": "http.response.body", "body": body})
    if transport is None or transport.is_closing():
        return
    transport.pause_reading()  # uvicorn reads again once a reply is complete
    if transport.can_write_eof():
        transport.write_eof()
    asyncio.get_running_loop().call_later(LINGER_S, transport.abort)
