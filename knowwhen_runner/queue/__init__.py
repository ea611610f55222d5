"""The run's queue: jobs, leases and results, behind one interface (responses live in ``cache/``).

``Queue`` is the union of a few small roles (``roles``: claiming, recording, run bookkeeping, holding
back, reading, batches); a caller takes the one it needs. Three backends implement them all:
``MemoryQueue`` (tests), and ``SqlQueue`` on SQLite (default, a file in the run folder) or PostgreSQL
(many machines; ``FOR UPDATE SKIP LOCKED`` claims). One contract test suite runs on all of them.
SQLAlchemy is touched only here and in ``cache/`` (the response store, which
opens its databases through ``engine``).

Job states: pending -> running (claimed under a lease) -> done | failed; an expired lease makes a running
job claimable again; completion is idempotent (the first recorded result wins, later ones are ignored);
a failure reported by a worker that has lost its lease is kept as an attempt but leaves the job to its
new holder.

A run is what its config says now: ``enqueue(..., whole_plan=ids)`` names every job of the current plan
(``enqueue(..., cells=...)`` every job of some of its cells: a config changed in part is re-planned in part),
and any other job of the run (of those cells) is *set aside* (status ``aside:<status>``, a running one as
``aside:pending``): kept with its result for the record, never claimed, completed, counted as open or
returned by ``results`` (all scenarios', or those named); ``counts`` reports them as ``set_aside``. A job of the plan that was set aside
is live again, with its result if it had one. ``init_run`` of an existing run records the new config text and keeps the meta. ``record``
writes a batch's results and failures at once (one transaction). A run is finalised
once: the first process to ``take_finalize`` a finished run does it. ``set_control`` holds a model back
(quarantined or paused: ``controls``); workers stop claiming its jobs, which stay pending. A ``set_aside``
row only tells which models a process's test set aside (no worker holds back on it: ``HOLDING_STATES``).
``budget_reserve``/``budget_settle`` keep the run's spending per budget scope, for every process.
``answers`` reads one filtered page of the open-loop answers (a few fields each, never whole results) and
``spend`` each model's recorded cost, for lists of large runs (``model_tallies`` each model's jobs per
status, cost, calls and cache hits, for ``status``); ``pace`` reads each model's pace (its
rate against its limit, what it waits for) from what these return, for ``status`` and the live view.
``describe_workers`` says whether each worker of the fleet is working, silent or stopped (one rule for
``run``, ``status`` and the viewer). Responses are cached apart from the queue (``knowwhen_runner.cache``).
"""

from __future__ import annotations

from .answers import AnswerPage, AnswerQuery, RecordedAnswer
from .batch_rows import BatchRecord
from .budget import BudgetAsk, BudgetTally
from .controls import CONTROL_STATES, HOLDING_STATES, ControlState, ModelControl, state_words
from .engine import is_shared_url
from .limits import LimitLedger
from .memory import MemoryQueue
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
    ModelTally,
    Queue,
    Reading,
    Recording,
    RunBookkeeping,
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
    "ModelControl",
    "ModelTally",
    "Queue",
    "Reading",
    "RecordedAnswer",
    "Recording",
    "RunBookkeeping",
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
    """Open the queue at ``url`` (``memory://``, ``sqlite:///path``, ``postgresql://...``) for ``run``."""
    if url.startswith("memory://"):
        return MemoryQueue(run)
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
