"""The SQL queue: one implementation for SQLite (default) and PostgreSQL (many machines).

SQLAlchemy Core runs on one background thread per process (anyio.to_thread with a limiter of one), so
the event loop never blocks on the database and one connection's transactions never interleave.
SQLite runs in WAL mode and takes its write lock at BEGIN, so two processes on one file wait for each
other. PostgreSQL claims with ``FOR UPDATE SKIP LOCKED`` in a CTE over a partial index of pending jobs,
and keeps leases on the database server's clock (see ``engine.py``).
"""

from __future__ import annotations

import sqlite3
from typing import Any, TypeVar

from sqlalchemy.dialects import postgresql, sqlite

from .answers import AnswerTables
from .batch_table import BatchTable
from .budget import ControlBudget
from .controls import ControlTables
from .engine import DbClock, make_engine, safe_url
from .leases import LeaseTables
from .outcomes import OutcomeTables
from .runs import RunTables
from .side_tables import SideTables

__all__ = ["SqlQueue", "safe_url"]

T = TypeVar("T")


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


class SqlQueue(
    RunTables, LeaseTables, OutcomeTables, AnswerTables, ControlTables, ControlBudget, SideTables, BatchTable
):
    """A ``Queue`` in a SQLite file or a PostgreSQL database.

    Its operations come in mixins by concern: the run and its jobs (``runs``), claims and leases
    (``leases``), outcomes (``outcomes``), answers, controls, budget, side tables and provider batches.
    """

    def __init__(self, url: str, run: str) -> None:
        self.run = run
        self.url = url
        self._engine = make_engine(url)
        self.dialect = self._engine.dialect.name
        self._clock = DbClock(self.dialect)

    # -- plumbing -------------------------------------------------------------------------------------

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
