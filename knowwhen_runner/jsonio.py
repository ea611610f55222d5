"""Reading and writing JSON Lines files, plain or gzipped, with errors that name the file and line.

Every file format of the benchmark is JSONL (optionally ``.gz``); the readers here are the one place
that turns a truncated archive or a malformed line into a ``ScenarioError`` a user can act on.
Gzipped output is written with a zero mtime and no file name so that the same rows give the same bytes.

A file the runner did not write may be hostile: a few megabytes of gzip can hold one line of gigabytes.
So every read is bounded (``ReadLimits``: the bytes of one line or JSON document, the bytes read from one
file after decompression, its rows), streamed line by line, and a file past a limit is one sentence
naming the file, the limit and the variable that raises it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson

from .exceptions import ScenarioError

__all__ = [
    "LIMIT_VARIABLES",
    "ReadLimits",
    "atomic_write_bytes",
    "bounded_lines",
    "dumps",
    "file_sha256",
    "find_jsonl",
    "iter_jsonl",
    "jsonl_bytes",
    "loads",
    "read_document",
    "read_json",
    "read_limits",
    "write_jsonl",
    "write_jsonl_bytes",
]


LIMIT_VARIABLES = {
    "line_bytes": "KNOWWHEN_MAX_LINE_BYTES",
    "file_bytes": "KNOWWHEN_MAX_FILE_BYTES",
    "rows": "KNOWWHEN_MAX_ROWS",
}
"""The environment variable that sets each limit of ``ReadLimits``."""


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """How much of a file the runner reads before it refuses it.

    ``line_bytes``: one line (or one JSON document such as ``corpus.json``), held in memory whole; the
    longest line of the published dataset is a few hundred kilobytes. ``file_bytes``: the bytes read from
    one file after decompression (the paper's largest answers file is under 1 GiB). ``rows``: the lines of
    one file (the largest published file has 168k rows, a paper run's a few million).
    """

    line_bytes: int = 64 << 20
    file_bytes: int = 16 << 30
    rows: int = 50_000_000

    def refusal(self, path: Path | str, line: int, which: str) -> str:
        """The sentence that refuses ``path`` at ``line`` for the limit ``which`` (a field name)."""
        what = {
            "line_bytes": "a line (or JSON document) longer than",
            "file_bytes": "more than",
            "rows": "more rows than",
        }[which]
        unit = "" if which == "rows" else " bytes"
        return (
            f"{path}:{line}: {what} {getattr(self, which):,}{unit}, the limit for a file read "
            f"(raise it with {LIMIT_VARIABLES[which]}=N if the file is trusted)"
        )


def read_limits() -> ReadLimits:
    """The limits, each from its variable (``LIMIT_VARIABLES``) when set to a positive whole number."""
    found: dict[str, int] = {}
    for name, variable in LIMIT_VARIABLES.items():
        text = os.environ.get(variable, "").strip().replace("_", "")
        if not text:
            continue
        if not text.isdigit() or len(text) > 19 or int(text) <= 0:
            raise ScenarioError(f"{variable}={text[:40]!r}: expected a positive whole number")
        found[name] = int(text)
    return ReadLimits(**found)


class Readable(Protocol):
    """A binary file read line by line (a plain file, a gzip stream)."""

    def readline(self, size: int | None = -1, /) -> bytes: ...


def bounded_lines(
    fh: Readable, path: Path | str, limits: ReadLimits | None = None, *, first_line: int = 1
) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, raw line)`` of an open binary file, refusing it (``ScenarioError``) at the first
    line, byte or row past ``limits``; no line longer than the limit is ever held in memory."""
    limits = limits or read_limits()
    total = 0
    line_no = first_line - 1
    while True:
        raw = fh.readline(limits.line_bytes + 1)
        if not raw:
            return
        line_no += 1
        if len(raw) > limits.line_bytes and not (len(raw) == limits.line_bytes + 1 and raw.endswith(b"\n")):
            raise ScenarioError(limits.refusal(path, line_no, "line_bytes"))
        total += len(raw)
        if total > limits.file_bytes:
            raise ScenarioError(limits.refusal(path, line_no, "file_bytes"))
        if line_no - first_line >= limits.rows:
            raise ScenarioError(limits.refusal(path, line_no, "rows"))
        yield line_no, raw


def dumps(obj: Any, *, sort_keys: bool = False) -> bytes:
    """Serialise to compact JSON bytes (orjson: ~20x faster than json on a 69-option question)."""
    option = orjson.OPT_SORT_KEYS if sort_keys else 0
    return orjson.dumps(obj, option=option | orjson.OPT_SERIALIZE_NUMPY)


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def find_jsonl(folder: Path, stem: str) -> Path | None:
    """Return ``folder/stem.jsonl.gz`` or ``folder/stem.jsonl``, whichever exists (gzip first)."""
    for name in (f"{stem}.jsonl.gz", f"{stem}.jsonl"):
        candidate = folder / name
        if candidate.is_file():
            return candidate
    return None


def _open(path: Path) -> io.BufferedIOBase:
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, row)`` for each non-blank line; every failure names the file and line."""
    if not path.is_file():
        raise ScenarioError(f"{path}: file not found")
    line_no = 0
    limits = read_limits()
    try:
        with _open(path) as fh:
            for line_no, raw in bounded_lines(fh, path, limits):
                if not raw.strip():
                    continue
                try:
                    row = orjson.loads(raw)
                except orjson.JSONDecodeError as exc:
                    raise ScenarioError(f"{path}:{line_no}: malformed JSON ({exc.msg})") from None
                if not isinstance(row, dict):
                    raise ScenarioError(f"{path}:{line_no}: expected a JSON object, got {type(row).__name__}")
                yield line_no, row
    except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
        if isinstance(exc, ScenarioError):
            raise
        raise ScenarioError(
            f"{path}:{line_no + 1}: cannot read the file (truncated or not gzip?): {exc}"
        ) from None


def read_document(path: Path) -> bytes:
    """The bytes of one JSON document (a manifest, ``corpus.json``), refused past the line limit, which is
    then all that was read of it."""
    limits = read_limits()
    with open(path, "rb") as fh:
        data = fh.read(limits.line_bytes + 1)
    if len(data) > limits.line_bytes:
        raise ScenarioError(limits.refusal(path, 1, "line_bytes"))
    return data


def read_json(path: Path) -> Any:
    """Read one JSON document, naming the file on failure."""
    if not path.is_file():
        raise ScenarioError(f"{path}: file not found")
    data = read_document(path)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ScenarioError(f"{path}:{exc.lineno}: malformed JSON ({exc.msg})") from None


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename, so a kill never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]], *, sort_keys: bool = False) -> int:
    """Write rows as JSONL (gzipped when the name ends in .gz), deterministically and atomically."""
    data, count = jsonl_bytes(rows, sort_keys=sort_keys)
    write_jsonl_bytes(path, data)
    return count


def jsonl_bytes(rows: Iterable[dict[str, Any]], *, sort_keys: bool = False) -> tuple[bytes, int]:
    """Rows as the bytes of a JSONL file (uncompressed), and how many rows."""
    buf = io.BytesIO()
    count = 0
    for row in rows:
        buf.write(dumps(row, sort_keys=sort_keys))
        buf.write(b"\n")
        count += 1
    return buf.getvalue(), count


def write_jsonl_bytes(path: Path, data: bytes, *, level: int = 6) -> None:
    """Write ``jsonl_bytes`` to ``path`` (gzipped at ``level``, with no time stamp, when the name ends in .gz)."""
    if path.suffix == ".gz":
        data = gzip.compress(data, compresslevel=level, mtime=0)
    atomic_write_bytes(path, data)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
