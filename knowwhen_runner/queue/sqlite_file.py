"""A damaged SQLite file is named before any connection opens it, so it is never written over.

SQLite takes a zero-byte file for a new database and creates tables in it, and it reports a truncated
or garbage file only at the first statement, deep inside whichever command came first. A run file
that was cut short, emptied or overwritten is refused here with one sentence instead, and left as it is.
"""

from __future__ import annotations

import time
from pathlib import Path

from ..exceptions import QueueError

__all__ = ["DAMAGED_LEAVE", "check_sqlite_file"]

_MAGIC = b"SQLite format 3\x00"
# How long an empty file may take to get its first page: processes started together (``--processes``)
# open a new file at the same moment, and one of them is writing it.
_CREATING_S = 2.0
DAMAGED_LEAVE = "it is left as it is: restore it from a copy, or move it away to start afresh"


def _wal_has_data(path: Path) -> bool:
    """Whether a write-ahead log beside the file holds pages (then the file alone may look short)."""
    wal = path.with_name(path.name + "-wal")
    try:
        return wal.stat().st_size > 0
    except OSError:
        return False


def _still_empty(path: Path) -> bool:
    """Whether an empty file stays empty: another process that is creating it writes within moments."""
    deadline = time.monotonic() + _CREATING_S
    while time.monotonic() < deadline:
        if _wal_has_data(path) or path.stat().st_size > 0:
            return False
        time.sleep(0.05)
    return True


def _problem(path: Path, head: bytes, size: int) -> str | None:
    if size == 0:
        return "is empty (0 bytes)" if _still_empty(path) else None
    if not head.startswith(_MAGIC):
        return "is not a SQLite file (its first bytes are not SQLite's)"
    if len(head) < 100:
        return f"is cut short ({size} bytes, less than SQLite's 100-byte header)"
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    counts_valid = head[24:28] == head[92:96]  # the header's page count is kept only when these agree
    expected = page_size * pages
    if counts_valid and size < expected and not _wal_has_data(path):
        return f"is cut short ({size:,} of {expected:,} bytes)"
    return None


def check_sqlite_file(database: str) -> None:
    """Raise ``QueueError`` if the SQLite file ``database`` exists and is empty, foreign or truncated."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database)
    try:
        size = path.stat().st_size
    except OSError:
        return  # not there yet: SQLite creates it
    if not path.is_file():
        raise QueueError(f"{path}: the database is not a file; {DAMAGED_LEAVE}")
    try:
        with path.open("rb") as fh:
            head = fh.read(100)
    except OSError as exc:
        raise QueueError(f"{path}: cannot read the database ({exc.strerror or exc})") from None
    problem = _problem(path, head, size)
    if problem:
        raise QueueError(f"{path}: the database {problem}; {DAMAGED_LEAVE}")
