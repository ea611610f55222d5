"""Connections to a run database, its clock, and its schema (created and versioned by us).

Shared by the queue (``sql.py``) and the fleet's rate-limit ledger (``limits.py``), which open their own
engines on the same URL. On PostgreSQL every time that other machines compare against (lease expiries,
heartbeats, rate-limit slots) is the database server's clock, read in SQL.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from sqlalchemy import Connection, Float, create_engine, event, inspect, literal, literal_column, select, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.elements import ColumnElement

from ..exceptions import QueueError, SchemaVersionError
from . import schema as s

__all__ = ["DbClock", "OnOneThread", "ensure_schema", "is_shared_url", "make_engine", "safe_url"]

# Leases and rate-limit slots are compared by processes on different machines. Their clocks drift (a
# few seconds is common without NTP), and a worker whose clock runs ahead by more than a lease would
# take live jobs from the others. So on PostgreSQL the database server's clock is the only clock:
# ``now()`` is the start of the (short) transaction, which is what every statement of a claim wants.
# SQLite is one machine's file, so its processes share that machine's clock.
_PG_NOW = "CAST(EXTRACT(EPOCH FROM now()) AS DOUBLE PRECISION)"
_SCHEMA_LOCK = 0x6B77_5F73  # pg_advisory_xact_lock key: one process creates the tables at a time


def safe_url(url: str) -> str:
    """The URL with any password hidden, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<database url>"


def is_shared_url(url: str) -> bool:
    """Whether processes on other machines can reach this database (PostgreSQL)."""
    return url.startswith("postgresql")


def _wal(cur: Any) -> None:
    """Put the file in WAL mode, waiting for processes that open a new file at the same moment.

    Switching a file to WAL needs it alone for an instant, and SQLite answers "database is locked" at
    once instead of waiting (busy_timeout does not apply), e.g. when ``--processes`` starts on a new file.
    """
    for attempt in range(200):
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == 199:
                raise
            time.sleep(0.05)


def make_engine(url: str, *, pool_size: int = 2) -> Engine:
    """An engine for SQLite (WAL, ``BEGIN IMMEDIATE``) or PostgreSQL (psycopg 3)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 60})

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA busy_timeout=60000")
            _wal(cur)
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            # Take the write lock at BEGIN: two processes then wait for each other (busy_timeout)
            # instead of failing with "database is locked" when a reader upgrades to a writer.
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    if parsed.get_backend_name() == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        return create_engine(parsed, pool_pre_ping=True, pool_size=pool_size, max_overflow=2)
    raise QueueError(f"{safe_url(url)}: unsupported database (use sqlite:///FILE or postgresql://...)")


class DbClock:
    """'Now' in epoch seconds: the server's clock on PostgreSQL, this machine's on SQLite."""

    def __init__(self, dialect: str) -> None:
        self.server_side = dialect == "postgresql"
        self.sql = _PG_NOW if self.server_side else ":now"  # for text() statements; bind ``now``

    def params(self) -> dict[str, float]:
        """Bind parameters every statement using ``sql`` needs (``now`` is ignored on PostgreSQL)."""
        return {"now": time.time()}

    def expr(self) -> ColumnElement[float]:
        """The same instant as a Core expression, for ``update().values(...)``."""
        if self.server_side:
            return literal_column(_PG_NOW, Float)
        return literal(time.time(), Float)


def _version_message(url: str, found: str) -> str:
    where = safe_url(url)
    try:
        version = int(found)
    except ValueError:
        return (
            f"{where}: its kw_meta schema_version is {found!r}, which no knowwhen_runner writes; "
            "give another database with --db"
        )
    code = s.SCHEMA_VERSION
    if version > code:
        return (
            f"{where}: written by a newer knowwhen_runner (run-schema version {version}, this one reads "
            f"{code}); upgrade knowwhen_runner on this machine, or give another database with --db"
        )
    return (
        f"{where}: written by an older knowwhen_runner (run-schema version {version}, this one reads "
        f"{code}); finish its runs with that release, or start afresh with another --db or run folder"
    )


def ensure_schema(engine: Engine, url: str) -> None:
    """Create the tables if missing; refuse a database of another schema version (newer or older)."""
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            # Processes starting together on a fresh database would race CREATE TABLE otherwise.
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SCHEMA_LOCK})
        version = select(s.meta.c.value).where(s.meta.c.key == "schema_version")
        if inspect(conn).has_table("kw_meta"):
            found = conn.execute(version).scalar()
            if found is not None and found != str(s.SCHEMA_VERSION):
                raise SchemaVersionError(_version_message(url, found))
        s.metadata.create_all(conn)
        if conn.execute(version).scalar() is None:
            conn.execute(s.meta.insert().values(key="schema_version", value=str(s.SCHEMA_VERSION)))


T = TypeVar("T")


class OnOneThread:
    """Runs a database object's synchronous work on a worker thread, one call at a time, schema first.

    The event loop never blocks on the database, and one connection's transactions never interleave.
    Driver errors become one-line ``QueueError``s naming the database (password hidden) and ``_what``.
    """

    url: str
    _engine: Engine
    _what = ""
    _limiter: anyio.CapacityLimiter | None = None
    _ready = False

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(1)
        return await anyio.to_thread.run_sync(
            functools.partial(self._guarded, fn, *args), limiter=self._limiter
        )

    def _guarded(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            if not self._ready:
                ensure_schema(self._engine, self.url)
                self._ready = True
            return fn(*args)
        except DBAPIError as exc:  # OperationalError and ProgrammingError included
            detail = str(getattr(exc, "orig", exc)).strip().splitlines()[0]
            raise QueueError(f"{safe_url(self.url)}: {self._what}{detail}") from None
