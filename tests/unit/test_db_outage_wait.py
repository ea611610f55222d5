"""A database that stays away longer than ``workers.max_db_outage_s`` ends the process with one sentence
and its own exit code; one that comes back within it is waited for. SQLite's lock held by another
connection for a moment is waited for on the database thread; held too long, it is an outage."""

from __future__ import annotations

import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from knowwhen_runner.exceptions import DatabaseUnavailable, QueueError
from knowwhen_runner.queue import database_down_since, find_run_name, open_queue, outage, set_max_db_outage


@pytest.fixture(autouse=True)
def _fresh_outage_state() -> Iterator[None]:
    outage._reset_for_tests()
    yield
    outage._reset_for_tests()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once the socket is closed


def test_a_database_away_too_long_ends_with_one_sentence_and_exit_6() -> None:
    """Nothing listens at the PostgreSQL address: the statement is tried again for the bound (1 s), then
    one DatabaseUnavailable names the bound and the last error, with exit code 6, and no later statement
    of the process waits again."""
    set_max_db_outage(1.0)
    queue = open_queue(f"postgresql+psycopg://postgres@127.0.0.1:{_closed_port()}/x", "r")
    seen: list[float | None] = []
    raised: list[DatabaseUnavailable] = []

    async def go() -> None:
        async def watch() -> None:
            await anyio.sleep(0.5)
            seen.append(database_down_since())

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            try:
                await queue.counts()
            except DatabaseUnavailable as exc:
                raised.append(exc)

    anyio.run(go)
    assert len(raised) == 1
    caught = pytest.ExceptionInfo.from_exception(raised[0])
    message = str(caught.value)
    assert caught.value.exit_code == 6 and isinstance(caught.value, QueueError)
    assert "longer than workers.max_db_outage_s (1 s)" in message and "\n" not in message
    assert seen and seen[0] is not None  # the progress line could say since when
    with pytest.raises(DatabaseUnavailable):
        anyio.run(queue.counts)  # given up: at once, no second wait


def test_a_wrong_statement_is_not_an_outage(tmp_path) -> None:
    """A driver error that is not about the database being away is a QueueError at once, not a wait."""
    import sqlite3

    from knowwhen_runner.queue.outage import is_unavailable

    assert is_unavailable(sqlite3.OperationalError("database is locked"))
    assert not is_unavailable(sqlite3.OperationalError("no such table: kw_jobs"))
    assert not is_unavailable(ValueError("x"))


def test_a_command_that_starts_while_its_database_is_away_waits_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Finding the run a command names only by its database (``worker --db URL``, ``status --db URL``) is
    its first statement, made before its event loop runs: it waits like any other, one line on stderr,
    then the same sentence after the bound."""
    set_max_db_outage(1.0)
    started = time.monotonic()
    with pytest.raises(DatabaseUnavailable, match=r"longer than workers.max_db_outage_s \(1 s\)"):
        find_run_name(f"postgresql+psycopg://postgres@127.0.0.1:{_closed_port()}/x")
    assert time.monotonic() - started >= 1.0
    err = capsys.readouterr().err
    assert err.count("the run database is unreachable") == 1 and "up to 1 s (workers.max_db_outage_s)" in err


def test_a_host_name_that_does_not_resolve_is_a_wrong_url_at_once() -> None:
    """A host name that does not resolve is a wrong URL far more often than an outage: no wait."""
    started = time.monotonic()
    with pytest.raises(QueueError) as caught:
        find_run_name("postgresql+psycopg://postgres@no-such-host.invalid/x")
    assert not isinstance(caught.value, DatabaseUnavailable)
    assert time.monotonic() - started < 30 and database_down_since() is None


@contextmanager
def _lock_held(path: Path, seconds: float, *, exclusive: bool = False) -> Iterator[None]:
    """Another connection (as another process would) holds the file's write lock for ``seconds``, or until
    the block ends."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE" if exclusive else "BEGIN IMMEDIATE")
    timer = threading.Timer(seconds, holder.execute, ("COMMIT",))
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()
        if holder.in_transaction:
            holder.execute("COMMIT")
        holder.close()


def test_a_write_lock_held_for_a_moment_is_waited_for_not_an_outage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another connection holds SQLite's write lock for 0.3 s: the worker's write waits for it (run again
    as the lock frees) and lands; no outage line is printed."""
    db = tmp_path / "run.db"
    queue = open_queue(f"sqlite:///{db}", "r")
    anyio.run(queue.register_worker, "w1")
    started = time.monotonic()
    with _lock_held(db, 0.3):
        anyio.run(queue.register_worker, "w2")
    assert time.monotonic() - started >= 0.3
    assert [w["id"] for w in anyio.run(queue.workers)] == ["w1", "w2"]
    assert "unreachable" not in capsys.readouterr().err and database_down_since() is None


def test_a_new_file_held_while_it_is_switched_to_wal_is_waited_for(tmp_path: Path) -> None:
    """A new file (no WAL yet) is held by another connection when this process first connects: switching
    it to WAL needs it alone, so the connection is made again once it is free."""
    db = tmp_path / "new.db"
    sqlite3.connect(db).close()
    queue = open_queue(f"sqlite:///{db}", "r")
    with _lock_held(db, 0.3, exclusive=True):
        anyio.run(queue.register_worker, "w1")
    assert [w["id"] for w in anyio.run(queue.workers)] == ["w1"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_a_write_lock_held_too_long_is_an_outage_that_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock held past ``LOCK_WAIT_S`` (1 s here) is a database away: waited out like any outage, and past
    ``max_db_outage_s`` the one sentence names the lock held, not a driver's words."""
    db = tmp_path / "run.db"
    queue = open_queue(f"sqlite:///{db}", "r")
    anyio.run(queue.register_worker, "w1")
    monkeypatch.setattr(outage, "LOCK_WAIT_S", 1.0)
    set_max_db_outage(0.5)
    started = time.monotonic()
    with _lock_held(db, 30.0), pytest.raises(DatabaseUnavailable) as caught:
        anyio.run(queue.register_worker, "w2")
    assert time.monotonic() - started >= 1.5  # a lock wait, then an outage wait (the lock waited for again)
    assert "another process has held the database's write lock for 1 s" in str(caught.value)
    assert "longer than workers.max_db_outage_s (0 s)" in str(caught.value)
