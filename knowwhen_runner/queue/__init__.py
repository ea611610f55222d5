"""The run's queue: jobs, leases and results in one database, so that processes on one machine or many
can share a run, stop anywhere and pick it up again (model responses are cached apart, in ``cache/``).

``Queue`` is the union of a few small roles (``roles``, where each operation's contract is written); a
caller takes the one it needs, and the worker its narrow seam, ``WorkerQueue``. Controls and budgets
(``queue.holding``) and provider batches (``queue.batching``) are stores beside the queue, over the same
database. ``SqlQueue`` keeps it in SQLite (default, a file in the run folder; ``memory://``
for a database in memory) or PostgreSQL (many machines); ``tests/contract`` holds it to one contract on
both. SQLAlchemy is touched only here and in ``cache/``.
"""

from __future__ import annotations

from .answers import AnswerPage, AnswerQuery, RecordedAnswer
from .batch_rows import BatchRecord
from .engine import is_shared_url
from .holding import (
    CONTROL_STATES,
    HOLDING_STATES,
    BudgetAsk,
    BudgetTally,
    ControlState,
    ModelControl,
    state_words,
)
from .limits import LimitLedger
from .outage import down_since as database_down_since
from .outage import set_max_db_outage
from .roles import (
    ASIDE,
    SET_ASIDE,
    AttemptKind,
    Batching,
    Claiming,
    ClaimQuota,
    Failure,
    HoldingBack,
    JobCounts,
    JobResult,
    JobStatus,
    Leasing,
    ModelTally,
    Queue,
    Reading,
    Recording,
    RunBookkeeping,
    WorkerQueue,
    WorkerRegistry,
    aside_status,
    live_status,
)
from .sql import SqlQueue
from .workers import describe_workers

__all__ = [
    "ASIDE",
    "CONTROL_STATES",
    "HOLDING_STATES",
    "SET_ASIDE",
    "AnswerPage",
    "AnswerQuery",
    "AttemptKind",
    "BatchRecord",
    "Batching",
    "BudgetAsk",
    "BudgetTally",
    "ClaimQuota",
    "Claiming",
    "ControlState",
    "Failure",
    "HoldingBack",
    "JobCounts",
    "JobResult",
    "JobStatus",
    "Leasing",
    "ModelControl",
    "ModelTally",
    "Queue",
    "Reading",
    "RecordedAnswer",
    "Recording",
    "RunBookkeeping",
    "WorkerQueue",
    "WorkerRegistry",
    "aside_status",
    "database_down_since",
    "describe_workers",
    "find_run_name",
    "is_shared_url",
    "live_status",
    "open_ledger",
    "open_queue",
    "set_max_db_outage",
    "state_words",
]


def open_queue(url: str, run: str) -> Queue:
    """Open the queue at ``url`` (``sqlite:///path``, ``postgresql://...``, or ``memory://``: a SQLite
    database in memory, its own, gone once closed) for ``run``."""
    return SqlQueue(url, run)


def find_run_name(url: str) -> str:
    """The name of the only run in the database at ``url``; a ``QueueError`` names what it found instead."""
    probe = SqlQueue(url, "")
    try:
        return probe.single_run_name()
    finally:
        probe._engine.dispose()


def open_ledger(url: str) -> LimitLedger:
    """The fleet's rate-limit ledger in the database at ``url`` (close it, or use it with ``async with``)."""
    return LimitLedger(url)
