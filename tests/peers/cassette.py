"""Cassettes: recorded HTTP exchanges with a real server, one JSON object per line.

A request is matched by its method, path and *canonical* body: the JSON with sorted keys and compact
separators. No field is dropped as volatile: the runner's requests are deterministic (its tool-call ids
are its own, sampling is pinned by the model's params), so an exact match is the honest test. Files
ending in ``.gz`` are gzip-compressed.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = [
    "KEPT_HEADERS",
    "Exchange",
    "append_exchange",
    "canonical",
    "compact",
    "first_difference",
    "read_cassette",
]

# Response headers a client's behaviour can depend on; the rest (date, server) are noise.
KEPT_HEADERS = ("content-type", "retry-after", "x-request-id")


def canonical(body: bytes | str | Any) -> str:
    """The request body as canonical JSON (sorted keys, compact); a non-JSON body as its text."""
    if isinstance(body, bytes | str):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        if not text:
            return ""
        try:
            body = json.loads(text)
        except ValueError:
            return text
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Exchange:
    """One request and the real server's answer to it."""

    method: str
    path: str
    request: str  # canonical body
    status: int
    headers: dict[str, str]
    response: str  # body text as sent
    label: str = ""  # what the recording was doing, for people reading the file
    seconds: float = 0.0  # how long the real server took (not replayed)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.method, self.path, self.request)

    def request_json(self) -> Any:
        return json.loads(self.request) if self.request else None

    def response_json(self) -> Any:
        return json.loads(self.response)


def _open(path: Path, mode: str) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", encoding="utf-8")
    return path.open(mode, encoding="utf-8")


def read_cassette(path: Path) -> list[Exchange]:
    """Every exchange of a cassette, in recording order."""
    with _open(path, "r") as f:
        return [Exchange(**json.loads(line)) for line in f if line.strip()]


def append_exchange(path: Path, exchange: Exchange) -> None:
    """Add one exchange at the end of a cassette (gzip members concatenate, so ``.gz`` works too)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _open(path, "a") as f:
        f.write(json.dumps(asdict(exchange), ensure_ascii=False, sort_keys=True) + "\n")


def compact(path: Path) -> None:
    """Rewrite a ``.gz`` cassette as one gzip member (appending leaves one per exchange, compressing poorly)."""
    if path.suffix == ".gz" and path.exists():
        exchanges = read_cassette(path)
        with gzip.open(path, "wt", encoding="utf-8", compresslevel=9) as f:
            f.writelines(json.dumps(asdict(e), ensure_ascii=False, sort_keys=True) + "\n" for e in exchanges)


def _walk(a: Any, b: Any, where: str) -> Iterator[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a:
                yield f"{where}.{k}: not recorded; sent {json.dumps(b[k])[:120]}"
            elif k not in b:
                yield f"{where}.{k}: recorded {json.dumps(a[k])[:120]}; not sent"
            else:
                yield from _walk(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            yield from _walk(x, y, f"{where}[{i}]")
        if len(a) != len(b):
            yield f"{where}: recorded {len(a)} items; sent {len(b)}"
    elif a != b:
        yield f"{where}: recorded {json.dumps(a)[:120]}; sent {json.dumps(b)[:120]}"


def first_difference(recorded: Any, sent: Any) -> list[str]:
    """Where two request bodies differ, as JSON paths (at most three), for a replay miss's message."""
    out: list[str] = []
    for line in _walk(recorded, sent, "$"):
        out.append(line)
        if len(out) == 3:
            break
    return out
