"""A run database that is briefly away is waited out: every process, every statement.

A restart, a failover to a new primary, a dropped or terminated connection, "the database system is
shutting down", SQLite's lock held too long by another process: each is raised by the thread that ran the
statement as ``DatabaseUnavailable`` (``is_unavailable`` decides), and ``wait_out`` runs the statement
again with a growing pause (every statement here is one transaction, so running it again is safe; the
queue's writes are idempotent). The outage is one state per process, since when, shown by the progress
line (``down_since``). After ``max_db_outage_s`` (``workers.max_db_outage_s``) the process stops with one
sentence and exit code ``DatabaseUnavailable.exit_code``; its leases lapse, so its jobs are pending.
A process that starts while its database is away waits the same way (``wait_out_blocking`` for a first
statement made outside the event loop), with ``DEFAULT_MAX_DB_OUTAGE_S`` until its config is read.
"""

from __future__ import annotations

import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import anyio

from ..exceptions import DatabaseUnavailable

__all__ = [
    "DEFAULT_MAX_DB_OUTAGE_S",
    "down_since",
    "is_unavailable",
    "set_max_db_outage",
    "wait_out",
    "wait_out_blocking",
]

DEFAULT_MAX_DB_OUTAGE_S = 600.0
_PAUSE_FIRST_S, _PAUSE_MAX_S = 0.2, 5.0
# SQLSTATE classes and codes of a server that is away or read-only for now: connection exception,
# operator intervention (shutdown, restart, "cannot connect now"), insufficient resources (too many
# connections, disk full), and a read-only transaction (a failover left us on a standby).
_PG_CLASSES = ("08", "57", "53")
_PG_CODES = ("25006",)
_SQLITE_WORDS = ("locked", "busy")
_NO_SUCH_HOST = ("translate host name", "failed to resolve host", "Name or service not known")
# A server that answers and refuses: a database or role that does not exist, a password or pg_hba.conf
# that says no. libpq gives these without a SQLSTATE; waiting would not change the answer.
_REFUSED = ("does not exist", "password authentication failed", "no pg_hba.conf entry")

T = TypeVar("T")


def is_unavailable(exc: BaseException) -> bool:
    """Whether a driver error says the database is away for now (not that the statement is wrong)."""
    if getattr(exc, "connection_invalidated", False):
        return True
    orig = getattr(exc, "orig", None) or exc
    if isinstance(orig, sqlite3.OperationalError):
        return any(word in str(orig) for word in _SQLITE_WORDS)
    if any(words in str(orig) for words in _NO_SUCH_HOST):
        return False  # a host name that does not resolve is a wrong URL far more often than an outage
    if any(words in str(orig) for words in _REFUSED):
        return False  # the server is there and said no: fail at once, with its sentence
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if isinstance(code, str):
        return code[:2] in _PG_CLASSES or code in _PG_CODES
    # psycopg raises these without a SQLSTATE when there is no server to give one (refused, closed).
    return type(orig).__name__ in ("OperationalError", "InterfaceError") and type(orig).__module__.startswith(
        "psycopg"
    )


@dataclass
class _Outage:
    max_s: float = DEFAULT_MAX_DB_OUTAGE_S
    since: float | None = None  # monotonic, while the database is away
    since_wall: float | None = None  # the same instant on the wall clock (what the progress line says)
    gave_up: DatabaseUnavailable | None = None


_STATE = _Outage()


def set_max_db_outage(seconds: float) -> None:
    """How long this process waits for its database (the config's ``workers.max_db_outage_s``)."""
    _STATE.max_s = seconds


def down_since() -> float | None:
    """When (epoch seconds) this process last found its database away, while it still is; else None."""
    return _STATE.since_wall


def _began(exc: DatabaseUnavailable) -> None:
    if _STATE.since is None:
        _STATE.since, _STATE.since_wall = time.monotonic(), time.time()
        print(
            f"\nknowwhen: the run database is unreachable ({exc}); waiting for it, up to "
            f"{_STATE.max_s:.0f} s (workers.max_db_outage_s)",
            file=sys.stderr,
            flush=True,
        )


def _ended() -> None:
    if _STATE.since is not None:
        took = time.monotonic() - _STATE.since
        _STATE.since = _STATE.since_wall = None
        print(f"\nknowwhen: the run database is back after {took:.0f} s", file=sys.stderr, flush=True)


def _too_long(exc: DatabaseUnavailable, where: str) -> DatabaseUnavailable:
    assert _STATE.since is not None
    return DatabaseUnavailable(
        f"{where}: the run database has been unreachable for {time.monotonic() - _STATE.since:.0f} s, "
        f"longer than workers.max_db_outage_s ({_STATE.max_s:.0f} s); this process stopped and its jobs "
        f"go back to pending: start it again once the database is back (last error: "
        f"{str(exc).removeprefix(where + ': ')})"
    )


def _pauses() -> Iterator[float]:
    pause = _PAUSE_FIRST_S
    while True:
        yield pause
        pause = min(_PAUSE_MAX_S, pause * 2)


def _not_given_up() -> None:
    if _STATE.gave_up is not None:
        raise _STATE.gave_up  # this process stopped waiting: its last statements do not wait again


def _still_away(exc: DatabaseUnavailable, where: str) -> None:
    """Note the outage (one line when it begins); past ``max_s``, give up with one sentence."""
    _began(exc)
    assert _STATE.since is not None
    if time.monotonic() - _STATE.since >= _STATE.max_s:
        _STATE.gave_up = _too_long(exc, where)
        raise _STATE.gave_up from None


async def wait_out(statement: Callable[[], Awaitable[T]], where: str) -> T:
    """Run ``statement``; while the database is away, wait and run it again, up to ``max_db_outage_s``."""
    pauses = _pauses()
    while True:
        _not_given_up()
        try:
            result = await statement()
        except DatabaseUnavailable as exc:
            _still_away(exc, where)
            await anyio.sleep(next(pauses))
            continue
        _ended()
        return result


def wait_out_blocking(statement: Callable[[], T], where: str) -> T:
    """``wait_out`` for a statement made before the process runs its event loop (e.g. finding the run
    a command names only by its database): a process that starts while its database is away waits too."""
    pauses = _pauses()
    with _ctrl_c_interrupts():
        while True:
            _not_given_up()
            try:
                result = statement()
            except DatabaseUnavailable as exc:
                _still_away(exc, where)
                time.sleep(next(pauses))
                continue
            _ended()
            return result


@contextmanager
def _ctrl_c_interrupts() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt here at once, even when called from a coroutine: the event loop's
    own SIGINT handler only cancels its task, which a thread blocked in a wait would not notice."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _reset_for_tests() -> None:
    """Forget any outage and the wait bound (a test process opens many databases in turn)."""
    global _STATE
    _STATE = _Outage()
