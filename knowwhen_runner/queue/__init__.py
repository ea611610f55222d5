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

A run is what its config says now: ``enqueue(..., whole_plan=ids)`` names every job of the current plan,
and any other job of the run is *set aside* (status ``aside:<status>``, a running one as
``aside:pending``): kept with its result for the record, never claimed, completed, counted as open or
returned by ``results`` (all scenarios', or those named); ``counts`` reports them as ``set_aside``. A job of the plan that was set aside
is live again, with its result if it had one. ``init_run`` of an existing run records the new config text and keeps the meta. ``record``
writes a batch's results and failures at once (one transaction). A run is finalised
once: the first process to ``take_finalize`` a finished run does it. ``set_control`` holds a model back
(quarantined or paused: ``controls``); workers stop claiming its jobs, which stay pending.
``budget_reserve``/``budget_settle`` keep the run's spending per budget scope, for every process.
``answers`` reads one filtered page of the open-loop answers (a few fields each, never whole results) and
``spend`` each model's recorded cost, for lists of large runs (``model_tallies`` each model's jobs per
status, cost, calls and cache hits, for ``status``); ``pace`` reads each model's pace (its
rate against its limit, what it waits for) from what these return, for ``status`` and the live view.
``describe_workers`` says whether each worker of the fleet is working, silent or stopped (one rule for
``run``, ``status`` and the viewer). Responses are cached apart from the queue (``knowwhen_runner.cache``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from ..exceptions import ErrorKind
from ..jobs import Job
from ..redaction import redact
from .answers import AnswerPage, AnswerQuery, RecordedAnswer
from .batch_rows import BatchRecord
from .budget import BudgetAsk, BudgetTally
from .controls import CONTROL_STATES, ControlState, ModelControl
from .outage import down_since as database_down_since
from .outage import set_max_db_outage
from .workers import describe_workers

if TYPE_CHECKING:
    from .limits import LimitLedger

__all__ = [
    "ASIDE",
    "CONTROL_STATES",
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
]

JobStatus = Literal["pending", "running", "done", "failed"]
"""Where a job of the current plan stands (a set-aside job's status is ``ASIDE`` + one of these)."""

AttemptKind = Literal[ErrorKind, "batch", "error"]
"""What a failed attempt records as its kind: a model call's ``ErrorKind``, ``batch`` (a provider batch
failed it) or ``error`` (anything else)."""

ASIDE = "aside:"
"""Prefix of the status of a job set aside (planned by an earlier version of the config)."""
SET_ASIDE = "set_aside"
"""The status ``counts`` reports set-aside jobs under, whatever they were before."""

from .tallies import ModelTally  # noqa: E402  (it reads the two names above)


def aside_status(status: str) -> str:
    """The status a job gets when set aside: a running job's lease is dropped (it is pending again)."""
    if status.startswith(ASIDE):
        return status
    return ASIDE + ("pending" if status == "running" else status)


def live_status(status: str) -> str:
    """The status a set-aside job gets back when the plan holds it again."""
    return status.removeprefix(ASIDE)


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed attempt of a job. ``final`` fails the job; otherwise it goes back to pending."""

    job_id: str
    error: str
    kind: AttemptKind = "error"
    final: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "error", redact(self.error))  # stored, printed and served: never a secret


@dataclass(frozen=True, slots=True)
class ClaimQuota:
    """Up to ``n`` jobs of any of ``models`` (one limit group) for one claim (``Queue.claim_each``)."""

    models: frozenset[str]
    n: int


class JobResult(NamedTuple):
    """A job of the current plan and where it stands: its result when done, its last error when failed."""

    job: Job
    status: JobStatus
    result: dict[str, Any] | None
    error: str | None


@dataclass(frozen=True, slots=True)
class JobCounts:
    model_id: str
    mode: str
    scenario_id: str
    status: str
    n: int


from .roles import (  # noqa: E402  (they name the types above)
    Batching,
    Claiming,
    HoldingBack,
    Queue,
    Reading,
    Recording,
    RunBookkeeping,
)


def open_queue(url: str, run: str) -> Queue:
    """Open the queue at ``url`` (``memory://``, ``sqlite:///path``, ``postgresql://...``) for ``run``."""
    if url.startswith("memory://"):
        from .memory import MemoryQueue

        return MemoryQueue(run)
    from .sql import SqlQueue

    return SqlQueue(url, run)


def find_run_name(url: str) -> str:
    """The name of the only run in the database at ``url``; a ``QueueError`` names what it found instead."""
    from .sql import SqlQueue

    probe = SqlQueue(url, "")
    try:
        return probe.single_run_name()
    finally:
        probe._engine.dispose()


def open_ledger(url: str) -> LimitLedger:
    """The fleet's rate-limit ledger in the database at ``url`` (close it, or use it with ``async with``)."""
    from .limits import LimitLedger

    return LimitLedger(url)


def is_shared_url(url: str) -> bool:
    """Whether processes on other machines can reach the database at ``url`` (PostgreSQL)."""
    from .engine import is_shared_url as shared

    return shared(url)
