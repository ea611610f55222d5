"""The run database's one retry policy: a lock held by another process, or a database away, is waited out.

Every statement here is one transaction with no effect outside the database (the queue's writes are
idempotent), so running it again is safe. Two things are waited for, each where it can be (both built on
tenacity, as the model calls are):

- SQLite's write lock held by another process (``is_busy``): a lock is held for a fraction of a
  millisecond, so ``wait_for_lock`` runs the transaction again on the database thread, 50 us apart
  growing to 1 ms, for up to a minute; a lock held longer is reported as ``DatabaseUnavailable``.
- A database away for now (``DatabaseUnavailable``: a restart, a failover, a dropped connection, "the
  database system is shutting down", that lock held too long; ``is_unavailable`` decides): ``wait_out``
  waits in the event loop, 0.2 s apart growing to 5 s, so the process stays cancellable. The outage is
  one state per process, since when, shown by the progress line (``down_since``). After
  ``max_db_outage_s`` (``workers.max_db_outage_s``) the process stops with one sentence and exit code
  ``DatabaseUnavailable.exit_code``; its leases lapse, so its jobs are pending. A process that starts while
  its database is away waits the same way (``wait_out_blocking`` for a first statement made outside the
  event loop), with ``DEFAULT_MAX_DB_OUTAGE_S`` until its config is read.

A statement that succeeds at once never enters tenacity (its bookkeeping costs more than a statement's
own round trip to the thread); the first failure starts the policy as its first attempt.
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
from typing import Any, NoReturn, TypeVar

import anyio
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    retry_if_exception_type,
    stop_after_delay,
    wait_exponential,
)

from ..exceptions import DatabaseUnavailable

__all__ = [
    "DEFAULT_MAX_DB_OUTAGE_S",
    "LOCK_WAIT_S",
    "down_since",
    "is_busy",
    "is_unavailable",
    "set_max_db_outage",
    "wait_for_lock",
    "wait_out",
    "wait_out_blocking",
]

DEFAULT_MAX_DB_OUTAGE_S = 600.0
_PAUSE_FIRST_S, _PAUSE_MAX_S = 0.2, 5.0
LOCK_WAIT_S = 60.0  # how long a transaction waits for another process's lock before it is an outage
_LOCK_PAUSE_FIRST_S, _LOCK_PAUSE_MAX_S = 0.00005, 0.001
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


def is_busy(exc: BaseException) -> bool:
    """Whether a driver error says another process holds SQLite's lock (the transaction was rolled back)."""
    orig = getattr(exc, "orig", None) or exc
    return isinstance(orig, sqlite3.OperationalError) and any(word in str(orig) for word in _SQLITE_WORDS)


def is_unavailable(exc: BaseException) -> bool:
    """Whether a driver error says the database is away for now (not that the statement is wrong)."""
    if getattr(exc, "connection_invalidated", False):
        return True
    orig = getattr(exc, "orig", None) or exc
    if isinstance(orig, sqlite3.OperationalError):
        return is_busy(orig)
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


def _began(state: RetryCallState) -> None:
    """An attempt found the database away: one line on stderr when the outage begins."""
    if _STATE.since is None:
        _STATE.since, _STATE.since_wall = time.monotonic(), time.time()
        print(
            f"\nknowwhen: the run database is unreachable ({_failure(state)}); waiting for it, up to "
            f"{_STATE.max_s:.0f} s (workers.max_db_outage_s)",
            file=sys.stderr,
            flush=True,
        )


def _ended() -> None:
    if _STATE.since is not None:
        took = time.monotonic() - _STATE.since
        _STATE.since = _STATE.since_wall = None
        print(f"\nknowwhen: the run database is back after {took:.0f} s", file=sys.stderr, flush=True)


def _failure(state: RetryCallState) -> BaseException:
    exc = state.outcome.exception() if state.outcome is not None else None
    assert exc is not None  # tenacity retries and stops only after a failed attempt
    return exc


def _not_given_up(_state: RetryCallState | None = None) -> None:
    if _STATE.gave_up is not None:
        raise _STATE.gave_up  # this process stopped waiting: its last statements do not wait again


def _away_too_long(_state: RetryCallState) -> bool:
    return _STATE.since is not None and time.monotonic() - _STATE.since >= _STATE.max_s


def _away_policy(where: str) -> dict[str, Any]:
    """How a database away for now is waited for (``wait_out``, ``wait_out_blocking``)."""

    def give_up(state: RetryCallState) -> NoReturn:
        assert _STATE.since is not None
        last = str(_failure(state)).removeprefix(where + ": ")
        _STATE.gave_up = DatabaseUnavailable(
            f"{where}: the run database has been unreachable for {time.monotonic() - _STATE.since:.0f} s, "
            f"longer than workers.max_db_outage_s ({_STATE.max_s:.0f} s); this process stopped and its jobs "
            f"go back to pending: start it again once the database is back (last error: {last})"
        )
        raise _STATE.gave_up from None

    return {
        "retry": retry_if_exception_type(DatabaseUnavailable),
        "wait": wait_exponential(multiplier=_PAUSE_FIRST_S, max=_PAUSE_MAX_S),
        "stop": _away_too_long,
        "before": _not_given_up,
        "after": _began,
        "retry_error_callback": give_up,
    }


def _lock_policy(where: str) -> Retrying:
    """How a lock held by another process is waited for (``wait_for_lock``)."""

    def stuck(_state: RetryCallState) -> NoReturn:
        raise DatabaseUnavailable(
            f"{where}: another process has held the database's write lock for {LOCK_WAIT_S:.0f} s; "
            "is a stuck knowwhen process still running on it?"
        ) from None

    return Retrying(
        retry=retry_if_exception(is_busy),
        wait=wait_exponential(multiplier=_LOCK_PAUSE_FIRST_S, max=_LOCK_PAUSE_MAX_S),
        stop=stop_after_delay(LOCK_WAIT_S),
        retry_error_callback=stuck,
        sleep=time.sleep,
    )


def _failed_once(first: BaseException, statement: Callable[[], T]) -> Callable[[], T]:
    """``statement`` as a policy's attempts, the first being the try that already failed with ``first``."""
    pending = [first]

    def attempt() -> T:
        if pending:
            raise pending.pop()
        return statement()

    return attempt


def _failed_once_async(
    first: BaseException, statement: Callable[[], Awaitable[T]]
) -> Callable[[], Awaitable[T]]:
    """``_failed_once`` for a coroutine (tenacity awaits only what a coroutine function returns)."""
    pending = [first]

    async def attempt() -> T:
        if pending:
            raise pending.pop()
        return await statement()

    return attempt


def wait_for_lock(transaction: Callable[[], T], where: str) -> T:
    """Run ``transaction`` on this (the database's) thread; while another process holds SQLite's lock, run
    it again, for up to ``LOCK_WAIT_S``; then ``DatabaseUnavailable`` says which lock held it."""
    try:
        return transaction()
    except Exception as exc:
        if not is_busy(exc):
            raise
        return _lock_policy(where)(_failed_once(exc, transaction))


async def wait_out(statement: Callable[[], Awaitable[T]], where: str) -> T:
    """Run ``statement``; while the database is away, wait and run it again, up to ``max_db_outage_s``."""
    _not_given_up()
    try:
        result = await statement()
    except DatabaseUnavailable as exc:
        retrying = AsyncRetrying(sleep=anyio.sleep, **_away_policy(where))
        result = await retrying(_failed_once_async(exc, statement))
    _ended()
    return result


def wait_out_blocking(statement: Callable[[], T], where: str) -> T:
    """``wait_out`` for a statement made before the process runs its event loop (e.g. finding the run
    a command names only by its database): a process that starts while its database is away waits too."""
    _not_given_up()
    with _ctrl_c_interrupts():
        try:
            result = statement()
        except DatabaseUnavailable as exc:
            result = Retrying(sleep=time.sleep, **_away_policy(where))(_failed_once(exc, statement))
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
