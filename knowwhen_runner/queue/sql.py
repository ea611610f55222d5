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
from .claims import LeaseTables
from .engine import RunDatabase, safe_url
from .holding import HoldingTables
from .outcomes import OutcomeTables
from .runs import RunTables
from .tallies import TallyTables
from .workers import WorkerTables

__all__ = ["SqlQueue", "safe_url"]


class SqlQueue(
    RunTables,
    LeaseTables,
    OutcomeTables,
    AnswerTables,
    TallyTables,
    WorkerTables,
):
    """A ``Queue`` in a SQLite file or a PostgreSQL database.

    Its jobs' operations come in parts by the queue's roles (``roles``): the run and its jobs (``runs``),
    claims and leases (``claims``), outcomes (``outcomes``), answers, tallies and the worker registry
    (``workers``). What holds models back (controls and budgets, ``holding``) and provider batches
    (``batches``) are stores of their own beside it, over the same ``RunDatabase``: ``holding`` and
    ``batching``. The common plumbing (``_insert``, ``_params``, ``_placeholder``, ``_bulk``) is
    ``RunStatements``.
    """

    def __init__(self, url: str, run: str) -> None:
        super().__init__(RunDatabase(url, run))
        self.holding = HoldingTables(self.db)
        self.batching = BatchTable(self.db)
