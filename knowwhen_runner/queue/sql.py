"""The SQL queue: one implementation for SQLite (default) and PostgreSQL (many machines).

SQLAlchemy Core runs on one background thread per process (anyio.to_thread with a limiter of one), so
the event loop never blocks on the database and one connection's transactions never interleave.
SQLite runs in WAL mode and takes its write lock at BEGIN, so two processes on one file wait for each
other. PostgreSQL claims with ``FOR UPDATE SKIP LOCKED`` in a CTE over a partial index of pending jobs,
and keeps leases on the database server's clock (see ``engine.py``).
"""

from __future__ import annotations

from .answers import AnswerTables
from .batches import BatchTable
from .budget import ControlBudget
from .claims import LeaseTables
from .controls import ControlTables
from .engine import DbClock, make_engine, safe_url
from .outcomes import OutcomeTables
from .runs import RunTables
from .tallies import TallyTables
from .workers import SideTables

__all__ = ["SqlQueue", "safe_url"]


class SqlQueue(
    RunTables,
    LeaseTables,
    OutcomeTables,
    AnswerTables,
    TallyTables,
    ControlTables,
    ControlBudget,
    SideTables,
    BatchTable,
):
    """A ``Queue`` in a SQLite file or a PostgreSQL database.

    Its operations come in mixins by the queue's roles (``roles``): the run and its jobs (``runs``),
    claims and leases (``claims``), outcomes (``outcomes``), answers, tallies, controls, budget, the
    worker registry (``workers``) and provider batches (``batches``); their common plumbing (``_insert``, ``_params``, ``_placeholder``, ``_bulk``) is ``RunStatements``.
    """

    def __init__(self, url: str, run: str) -> None:
        self.run = run
        self.url = url
        self._engine = make_engine(url)
        self.dialect = self._engine.dialect.name
        self._clock = DbClock(self.dialect)
