"""Request bodies sent with ``Content-Encoding``: zstd (the vendor SDK's choice for bodies of 1 KiB or
more) and gzip, decoded with a cap on the decoded size so a small body cannot expand without bound.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

try:
    import zstandard
except ImportError:  # the server still answers plain and gzip bodies; zstd ones get a 415
    zstandard = None  # type: ignore[assignment]

__all__ = [
    "MAX_DECODED_BYTES",
    "BodyTooLarge",
    "UndecodableBody",
    "UnsupportedEncoding",
    "decode_body",
    "read_body",
]

MAX_DECODED_BYTES = 64 * 2**20


class UnsupportedEncoding(Exception):
    """The body uses a content coding this server does not decode (HTTP 415)."""


class UndecodableBody(Exception):
    """The body is not valid data in the coding it declares (HTTP 400)."""


class BodyTooLarge(Exception):
    """The decoded body is larger than ``MAX_DECODED_BYTES`` (HTTP 413)."""


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


async def read_body(receive: Callable[[], Awaitable[dict[str, Any]]]) -> bytes:
    """The whole request body of an ASGI request, as sent (still encoded)."""
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    return body
