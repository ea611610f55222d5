"""Connections to a run database, its clock, and its schema (created and versioned by us).

Shared by the queue (``sql.py``) and the fleet's rate-limit ledger (``limits.py``), which open their own
engines on the same URL. On PostgreSQL every time that other machines compare against (lease expiries,
heartbeats, rate-limit slots) is the database server's clock, read in SQL. ``RunDatabase`` is one run's
database; ``RunStatements`` is the plumbing of every store over it (``sql.py``).
"""

from __future__ import annotations

import functools
import json
import sqlite3
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import anyio
import anyio.to_thread
from sqlalchemy import (
    Connection,
    Float,
    create_engine,
    event,
    inspect,
    literal,
    literal_column,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.pool import StaticPool
from sqlalchemy.sql.elements import ColumnElement

from ..exceptions import DatabaseUnavailable, QueueError, SchemaVersionError
from ..redaction import add_secret
from . import schema as s
from .outage import is_busy, is_unavailable, wait_for_lock, wait_out, wait_out_blocking
from .sqlite_file import DAMAGED_LEAVE, check_sqlite_file

__all__ = [
    "DbClock",
    "OnOneThread",
    "RunDatabase",
    "RunStatements",
    "ensure_schema",
    "is_shared_url",
    "make_engine",
    "on_db_thread",
    "safe_url",
]

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


def make_engine(url: str, *, pool_size: int = 2) -> Engine:
    """An engine for SQLite (WAL, ``BEGIN IMMEDIATE``) or PostgreSQL (psycopg 3).

    ``memory://`` (and ``sqlite://``) is a SQLite database in memory, private to the engine and gone
    when it is disposed: one connection, which every thread the statements run on shares.
    """
    if url.startswith("memory://"):
        url = "sqlite://"
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise QueueError(
            "a database URL (db, cache.url or --db) is not one: use sqlite:///FILE or postgresql://HOST/NAME"
        ) from None
    # A password given by --db or KNOWWHEN_DB (no ``${NAME}`` registered it) is redacted all the same.
    add_secret(parsed.password if isinstance(parsed.password, str) else None)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url, parsed.database or "")
    if parsed.get_backend_name() == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        return create_engine(parsed, pool_pre_ping=True, pool_size=pool_size, max_overflow=2)
    raise QueueError(f"{safe_url(url)}: unsupported database (use sqlite:///FILE or postgresql://...)")


def _sqlite_engine(url: str, database: str) -> Engine:
    in_memory = database in ("", ":memory:")
    if not in_memory:
        check_sqlite_file(database)  # before SQLite writes a damaged file over
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    # No busy_timeout: SQLite's own wait sleeps 1, 2, 5, 10 ... 100 ms between tries, and with two
    # processes on one file most transactions would sleep milliseconds for a lock held 0.1 ms. A
    # transaction that finds the file locked fails at once and is run again (``outage.wait_for_lock``),
    # whether at BEGIN or, switching a new file to WAL, at connect (which needs the file alone for an
    # instant, e.g. when ``--processes`` starts on a new file).
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": 0},
        **({"poolclass": StaticPool} if in_memory else {}),
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        try:
            cur.execute("PRAGMA journal_mode=WAL")
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):
                raise
            raise QueueError(f"{database}: the database is damaged ({exc}); {DAMAGED_LEAVE}") from None
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # Writers take the write lock at BEGIN: two processes then wait for each other instead of
        # failing with "database is locked" when a reader upgrades to a writer. Reads (see
        # ``OnOneThread._reading``) begin deferred and never wait for a writer (WAL).
        raw = conn.connection.driver_connection
        assert raw is not None
        raw.execute("BEGIN" if conn.get_execution_options().get("kw_read") else "BEGIN IMMEDIATE")

    return engine


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


def _migrate(conn: Connection, found: str) -> str:
    """Upgrade a database of an older schema version step by step while ``MIGRATIONS`` knows how."""
    while found.isdigit() and int(found) < s.SCHEMA_VERSION and int(found) in s.MIGRATIONS:
        for statement in s.MIGRATIONS[int(found)]:
            if isinstance(statement, str):
                conn.execute(text(statement))
            else:
                statement(conn)
        found = str(int(found) + 1)
        conn.execute(update(s.meta).where(s.meta.c.key == "schema_version").values(value=found))
    return found


def ensure_schema(engine: Engine, url: str) -> None:
    """Create the tables if missing; upgrade an older database we can, refuse any other version."""
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            # Processes starting together on a fresh database would race CREATE TABLE otherwise.
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SCHEMA_LOCK})
        version = select(s.meta.c.value).where(s.meta.c.key == "schema_version")
        if inspect(conn).has_table("kw_meta"):
            found = conn.execute(version).scalar()
            if found is not None and found != str(s.SCHEMA_VERSION):
                found = _migrate(conn, found)
            if found is not None and found != str(s.SCHEMA_VERSION):
                raise SchemaVersionError(_version_message(url, found))
        s.metadata.create_all(conn)
        if conn.execute(version).scalar() is None:
            conn.execute(s.meta.insert().values(key="schema_version", value=str(s.SCHEMA_VERSION)))


T = TypeVar("T")
P = ParamSpec("P")
TSelf = TypeVar("TSelf", bound="OnOneThread")


class OnOneThread:
    """Runs a database object's synchronous work on a worker thread, one call at a time, schema first.

    The event loop never blocks on the database, and one connection's transactions never interleave.
    A store writes each statement as a plain method and marks it ``@on_db_thread``; its callers await it.
    Driver errors become one-line ``QueueError``s naming the database (password hidden) and ``_what``;
    a lock held by another process is waited for on the thread (``outage.wait_for_lock``), and a database
    away for now (``outage.is_unavailable``) raises ``DatabaseUnavailable``, which ``_call`` waits out
    (``outage.wait_out``), and ``_call_blocking`` too, on the caller's thread.
    """

    url: str
    _engine: Engine
    _what = ""
    _limiter: anyio.CapacityLimiter | None = None
    _ready = False

    async def close(self) -> None:
        self._engine.dispose()

    def _ensure_schema(self) -> None:
        """Create or check this object's tables before its first statement (the run schema here)."""
        ensure_schema(self._engine, self.url)

    async def __aenter__(self: TSelf) -> TSelf:
        return self

    async def __aexit__(self, *exc: object) -> None:
        with anyio.CancelScope(shield=True):  # closed even when the block is cancelled
            await self.close()

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(1)
        limiter = self._limiter

        async def statement() -> T:
            return await anyio.to_thread.run_sync(
                functools.partial(self._guarded, fn, *args), limiter=limiter
            )

        return await wait_out(statement, safe_url(self.url))  # a database away for now is waited for

    def _call_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """``_call`` on this thread, for the first statement of a command before its event loop runs."""
        return wait_out_blocking(functools.partial(self._guarded, fn, *args), safe_url(self.url))

    def _guarded(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn`` on this thread, run again while another process holds SQLite's lock (``wait_for_lock``)."""
        return wait_for_lock(functools.partial(self._once, fn, *args), safe_url(self.url))

    def _once(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            if not self._ready:
                self._ensure_schema()
                self._ready = True
            return fn(*args)
        except (DBAPIError, sqlite3.Error) as exc:  # OperationalError and ProgrammingError included
            if is_busy(exc):
                raise  # rolled back: ``wait_for_lock`` runs it again
            orig = getattr(exc, "orig", exc)
            detail = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
            error = DatabaseUnavailable if is_unavailable(exc) else QueueError
            raise error(f"{safe_url(self.url)}: {self._what}{detail}") from None
        except (json.JSONDecodeError, UnicodeDecodeError):  # damage SQLite's own checks let through
            raise QueueError(
                f"{safe_url(self.url)}: a stored record does not read back: the database is damaged; "
                f"{DAMAGED_LEAVE}"
            ) from None

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        """A read-only transaction: on SQLite it takes no write lock, so it never waits for a writer."""
        with self._engine.connect() as conn:
            conn.execution_options(kw_read=True)
            with conn.begin():
                yield conn


def on_db_thread(
    method: Callable[Concatenate[TSelf, P], T],
) -> Callable[Concatenate[TSelf, P], Coroutine[Any, Any, T]]:
    """A store's statement, written as a plain method, as the coroutine its callers await: the body runs
    on the store's database thread (``OnOneThread._call``: one call at a time, a lock or an outage waited
    out)."""

    async def on_thread(self: TSelf, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._call(functools.partial(method, self, *args, **kwargs))

    functools.update_wrapper(on_thread, method)  # its name and docstring; the coroutine's type kept
    return on_thread


def _sqlite_has_bulk() -> bool:
    """UPDATE ... FROM (SQLite 3.33) and the JSON functions (built in from 3.38, usually before)."""
    if sqlite3.sqlite_version_info < (3, 33, 0):
        return False
    probe = sqlite3.connect(":memory:")
    try:
        probe.execute("SELECT json_group_array(value) FROM json_each('[1]')")
    except sqlite3.OperationalError:
        return False
    finally:
        probe.close()
    return True


_SQLITE_BULK = _sqlite_has_bulk()


class RunDatabase(OnOneThread):
    """One run's database: its engine, its clock, and the one thread its statements run on.

    The queue and the stores beside it (``SqlQueue.holding``, ``SqlQueue.batching``) are composed over one
    ``RunDatabase``: they share its connections and take turns on its thread. Closing it closes them all.
    """

    def __init__(self, url: str, run: str) -> None:
        self.url = url
        self.run = run
        self._engine = make_engine(url)
        self.dialect = self._engine.dialect.name
        self._clock = DbClock(self.dialect)


class RunStatements(OnOneThread):
    """A store of a run's tables over a ``RunDatabase``: the run, its dialect and clock, and their spellings.

    Its statements run on the database's thread (``_call`` goes there); it owns no connection of its own.
    """

    run: str
    dialect: str
    _clock: DbClock

    def __init__(self, db: RunDatabase) -> None:
        self.db = db
        self.url, self.run, self.dialect = db.url, db.run, db.dialect
        self._engine, self._clock = db._engine, db._clock

    async def close(self) -> None:
        await self.db.close()

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.db._call(fn, *args)

    def _call_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        return self.db._call_blocking(fn, *args)

    def _insert(self, table: Any) -> Any:
        return (postgresql.insert if self.dialect == "postgresql" else sqlite.insert)(table)

    def _params(self, **values: Any) -> dict[str, Any]:
        return {"run": self.run, **self._clock.params(), **values}

    @property
    def _placeholder(self) -> str:
        return "?" if self.dialect == "sqlite" else "%s"

    @property
    def _bulk(self) -> bool:
        """Whether writes of many rows go as one statement over a JSON array (SQLite 3.33 and later).

        SQLite's driver lets go of the interpreter's lock for every row it steps; under a busy event loop
        each such step then waits up to a few milliseconds to get it back, all while holding the file's
        write lock that other processes wait for. One statement steps once.
        """
        return self.dialect == "sqlite" and _SQLITE_BULK
