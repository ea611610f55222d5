"""A damaged SQLite file is named before any connection opens it, so it is never written over.

SQLite reports a truncated or garbage file only at the first statement, deep inside whichever command
came first. A run file that was cut short or overwritten is refused here with one sentence instead, and
left as it is. A zero-byte file holds nothing to lose (a run killed as it created its file leaves one, and
so does a reader that opened the path first): SQLite takes it for a new database, and the commands that
read a run refuse a database that has none.
"""

from __future__ import annotations

from pathlib import Path

from ..exceptions import QueueError

__all__ = ["DAMAGED_LEAVE", "check_sqlite_file"]

_MAGIC = b"SQLite format 3\x00"
DAMAGED_LEAVE = "it is left as it is: restore it from a copy, or move it away to start afresh"


def _wal_has_data(path: Path) -> bool:
    """Whether a write-ahead log beside the file holds pages (then the file alone may look short)."""
    wal = path.with_name(path.name + "-wal")
    try:
        return wal.stat().st_size > 0
    except OSError:
        return False


def _problem(path: Path, head: bytes, size: int) -> str | None:
    if size == 0:
        return None  # a new database: nothing in it to lose
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
    """Raise ``QueueError`` if the SQLite file ``database`` exists and is foreign or truncated."""
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
