"""The queue's roles: small protocols a backend implements, ``Queue``, their union, ``WorkerQueue``, the
worker's seam, and the values they trade in (a job's status, a failed attempt, a claim's quota, a tally).

A caller takes the role it needs (the budget guard ``HoldingBack``, say), the worker ``WorkerQueue``, the
sweep, finaliser and CLI ``Queue``. Controls and budgets (``HoldingBack``) and provider batches
(``Batching``) are stores beside the queue, over its database: ``queue.holding``, ``queue.batching``.
``SqlQueue`` implements every role; ``tests/contract`` holds it to one contract on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

from ..exceptions import ErrorKind
from ..jobs import Cell, Job
from ..redaction import redact

if TYPE_CHECKING:
    from ..jobs import Items
    from .answers import AnswerPage, AnswerQuery
    from .batch_rows import BatchRecord
    from .holding import BudgetAsk, BudgetTally, ControlState, ModelControl

__all__ = [
    "ASIDE",
    "SET_ASIDE",
    "AttemptKind",
    "Batching",
    "ClaimQuota",
    "Claiming",
    "Failure",
    "HoldingBack",
    "JobCounts",
    "JobResult",
    "JobStatus",
    "Leasing",
    "ModelTally",
    "Queue",
    "Reading",
    "Recording",
    "RunBookkeeping",
    "WorkerQueue",
    "WorkerRegistry",
    "aside_status",
    "live_status",
]


JobStatus = Literal["pending", "running", "done", "failed"]
"""Where a job of the current plan stands (a set-aside job's status is ``ASIDE`` + one of these).

pending -> running (claimed under a lease) -> done | failed; an expired lease makes a running job
claimable again. Completion is idempotent: the first recorded result wins, later ones are ignored. A
failure reported by a worker that has lost its lease is kept as an attempt but leaves the job to its new
holder."""

AttemptKind = Literal[ErrorKind, "batch", "error"]
"""What a failed attempt records as its kind: a model call's ``ErrorKind``, ``batch`` (a provider batch
failed it) or ``error`` (anything else)."""

ASIDE = "aside:"
"""Prefix of the status of a job set aside (planned by an earlier version of the config, see ``enqueue``):
kept with its result for the record, never claimed, completed, counted as open or returned by
``results``; live again, with its result if it had one, once the plan holds it again."""
SET_ASIDE = "set_aside"
"""The status ``counts`` reports set-aside jobs under, whatever they were before."""


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


@dataclass
class ModelTally:
    """One model's jobs of the plan by status, and what its results recorded."""

    model_id: str
    statuses: dict[str, int] = field(default_factory=dict)  # pending / running / done / failed / set_aside
    cost_usd: float = 0.0
    calls: int = 0
    cache_hits: int = 0
    scenarios: dict[str, dict[str, int]] = field(default_factory=dict)
    """Its jobs per scenario and status (set-aside ones as ``set_aside``): the live view's cells."""

    def add(
        self, status: str, n: int, cost_usd: float, calls: int, cache_hits: int, scenario: str | None = None
    ) -> None:
        if scenario is not None:
            cell = self.scenarios.setdefault(scenario, {})
            key = SET_ASIDE if status.startswith(ASIDE) else status
            cell[key] = cell.get(key, 0) + n
        if status.startswith(ASIDE):
            self.statuses[SET_ASIDE] = self.statuses.get(SET_ASIDE, 0) + n
            return
        self.statuses[status] = self.statuses.get(status, 0) + n
        self.cost_usd += cost_usd
        self.calls += calls
        self.cache_hits += cache_hits


class Leasing(Protocol):
    """What a worker does with leases: take jobs under one, keep it, give jobs back, take back the jobs of
    workers gone silent."""

    run: str

    async def claim_each(
        self, worker: str, quotas: Sequence[ClaimQuota], lease_s: float, *, key: str | None = None
    ) -> list[Job]:
        """Up to each quota's ``n`` pending jobs of its models, in id order, in one transaction.

        A claim sent again (its reply lost: the database went away after the commit) returns the jobs
        the first one leased and leases no more; ``key`` names a claim so that its caller may send it
        again, and one is made up otherwise."""
        ...

    async def heartbeat(self, worker: str, lease_s: float) -> int: ...
    async def release(self, worker: str, job_ids: list[str]) -> int: ...
    async def release_unheld(self, worker: str, held: AbstractSet[str]) -> list[str]:
        """Give back the jobs leased to ``worker`` that are not in ``held`` (what it knows it holds): a
        claim whose commit succeeded but whose reply never reached it. Jobs parked in a provider batch
        are the batch's, not the worker's, and stay. Their ids, released as by ``release``."""
        ...

    async def requeue_expired(self, stale_after_s: float | None = None) -> int:
        """Running jobs whose lease expired, or (``stale_after_s``) whose worker's heartbeat is older than
        that, go back to pending; how many."""
        ...


class Claiming(Leasing, Protocol):
    """Taking jobs to work under a lease, keeping the lease, and giving jobs back."""

    async def claim(
        self, worker: str, n: int, lease_s: float, exclude_models: frozenset[str] = frozenset()
    ) -> list[Job]: ...
    async def requeue_failed(self) -> int: ...


class Recording(Protocol):
    """Writing what a worker found: results and failed attempts (completion is idempotent)."""

    run: str

    async def complete(self, worker: str, results: list[tuple[str, dict[str, Any]]]) -> int: ...
    async def fail(self, worker: str, failures: list[Failure]) -> int: ...
    async def record(
        self,
        worker: str,
        results: list[tuple[str, dict[str, Any]]],
        failures: list[Failure],
    ) -> int:
        """A batch's results and failures at once, in one transaction."""
        ...


class WorkerRegistry(Protocol):
    """The workers of the fleet: who is working the run, and since when it was last heard from."""

    async def register_worker(self, worker: str) -> None: ...
    async def stop_worker(self, worker: str) -> None: ...
    async def workers(self) -> list[dict[str, Any]]: ...


class RunBookkeeping(WorkerRegistry, Protocol):
    """The run itself: its config and meta, its plan and items, who plans a stage and who finalises, and
    the workers of the fleet."""

    run: str

    async def init_run(self, config_text: str, meta: dict[str, Any]) -> dict[str, Any]:
        """Create the run, or record the new config text of an existing one (its meta is kept)."""
        ...

    async def run_info(self) -> dict[str, Any] | None: ...
    async def update_meta(self, patch: dict[str, Any]) -> dict[str, Any]: ...
    async def merge_meta(self, key: str, merge: Callable[[Any], Any]) -> Any:
        """Set the meta's ``key`` to ``merge(its value)``, the run's row locked meanwhile (concurrent merges
        take turns, each seeing the other's); the value written. ``merge`` may run more than once."""
        ...

    async def set_draws(self, scenario_id: str, draws: dict[str, int]) -> int:
        """Give the scenario's jobs their claim order (``draw``) by item, whatever their status (a screen
        added to a planned run draws the order of the jobs planned before it); how many changed."""
        ...

    async def enqueue(
        self,
        jobs: Iterable[Job],
        items: Items,
        *,
        whole_plan: AbstractSet[str] | None = None,
        cells: Sequence[Cell] | None = None,
        keep: AbstractSet[str] = frozenset(),
    ) -> int:
        """Add the jobs not in the run yet (and the items), in one transaction; how many were new.

        ``jobs`` is read batch by batch, and again if the transaction is retried: give a list or an
        iterable that starts over (a plan's ``Grid``), never a one-shot generator. ``cells``: the jobs
        given and the ids in ``keep`` are the whole plan of these cells (``WHOLE_RUN``: of the run); their
        other jobs are set aside, and a set-aside job given is live again. ``whole_plan``: every id of
        the run's plan (those given and those kept), the same as ``cells=[WHOLE_RUN]``."""
        ...

    async def items(self, scenario_id: str | None = None, *, of_open_jobs: bool = False) -> Items:
        """The run's item data (of one scenario); ``of_open_jobs``: only the items of its pending, running
        and failed jobs, found through them (what a process that starts on a large run needs)."""
        ...

    async def take_stage(self, stage: str, worker: str) -> str:
        """Who plans ``stage`` (a later stage of the run, named by the fits it is planned from): the
        first process to ask, fleet-wide; the others get its name and wait for its plan."""
        ...

    async def take_finalize(self, worker: str) -> bool:
        """Whether ``worker`` finalises the run: the first process to ask once no job is open (a screened-out
        model's pending jobs aside), fleet-wide; a run is finalised once."""
        ...

    async def release_finalize(self, worker: str) -> None: ...


class HoldingBack(Protocol):
    """What holds a model's work back for every process: controls (quarantined, paused) and budgets; and
    the models a process set aside (told, not obeyed)."""

    run: str

    async def set_control(
        self, model_id: str, state: ControlState, reason: str, *, replace: bool = False
    ) -> bool:
        """Hold a model back (quarantined or paused): workers stop claiming its jobs, which stay pending.
        A ``set_aside`` row only tells which models a process's test set aside (``HOLDING_STATES``)."""
        ...

    async def clear_controls(self, state: ControlState, model_id: str | None = None) -> int: ...
    async def controls(self) -> list[ModelControl]: ...
    async def budget_reserve(self, asks: list[BudgetAsk]) -> str | None:
        """Reserve a call's spending in every budget scope at once (for every process), or none: the
        first scope whose cap it would pass. ``budget_settle`` counts what the call really cost."""
        ...

    async def budget_settle(
        self, reserved: list[BudgetAsk], actual_usd: float, actual_tokens: int
    ) -> None: ...
    async def budget_tallies(self) -> list[BudgetTally]: ...
    async def budget_forget_reservations(self) -> None: ...


class Reading(Protocol):
    """Where the run stands, summed or paged by the database: counts, results, answers, tallies."""

    run: str

    async def counts(self, *, open_only: bool = False) -> list[JobCounts]:
        """Jobs per model, mode, scenario and status (set-aside ones as ``SET_ASIDE``); ``open_only``:
        the pending and running ones alone, found by index (what a start-up or an idle worker needs)."""
        ...

    async def status_totals(self) -> dict[str, int]:
        """Jobs per status (set-aside ones as ``SET_ASIDE``), counted from an index, never the rows."""
        ...

    async def done_lately(self, seconds: float) -> dict[str, tuple[int, float]]:
        """Per model: jobs done in the last ``seconds`` (database clock), and how long ago the first of them."""
        ...

    async def results(
        self, scenarios: AbstractSet[str] | None = None, *, status: JobStatus | None = None
    ) -> list[JobResult]:
        """Every job of the plan (of the scenarios named) in id order, or only those in ``status``: a
        resume reads its open jobs alone (an index of them), never the results of the done ones."""
        ...

    async def job_ids(self) -> dict[tuple[str, str], list[str]]:
        """The ids of the plan's jobs by (scenario, model), in id order, without reading any result."""
        ...

    async def results_of(self, ids: Sequence[str]) -> list[JobResult]:
        """The jobs of the plan among ``ids``, in id order, each found by its key: a finaliser reads one
        model's results at a time, never the whole run's at once."""
        ...

    async def answers(self, query: AnswerQuery) -> AnswerPage:
        """One filtered page of the open-loop answers, a few fields each (never whole results), for lists
        of large runs."""
        ...

    async def spend(self) -> dict[str, float]:
        """Each model's recorded cost."""
        ...

    async def model_tallies(self) -> dict[str, ModelTally]:
        """Each model's jobs of the plan per status, recorded cost, calls and cache hits, summed by the
        database (``status`` reads these, never every result)."""
        ...

    async def attempt_errors(self, job_id: str) -> list[dict[str, Any]]: ...


class Batching(Protocol):
    """Provider batches (``batch_rows`` explains the rows): open before submitting, note what happened,
    lease open batches to poll them, take a finished batch's jobs back under a worker's lease."""

    run: str

    async def batch_open(
        self, worker: str, key: str, model_id: str, job_ids: list[str], lease_s: float
    ) -> int: ...
    async def batch_note(
        self,
        key: str,
        *,
        status: str | None = None,
        provider_id: str | None = None,
        counts: dict[str, int] | None = None,
        error: str | None = None,
    ) -> None: ...
    async def batch_lease(
        self, worker: str, lease_s: float, model_ids: frozenset[str]
    ) -> list[BatchRecord]: ...
    async def batch_take(self, worker: str, key: str, lease_s: float) -> list[Job]: ...
    async def batches(self) -> list[BatchRecord]: ...


class WorkerQueue(Leasing, Recording, WorkerRegistry, Protocol):
    """The worker's seam: leases (claim, heartbeat, release, requeue the silent's jobs), outcomes, the
    registry, and the open jobs' counts (``Reading.counts``: is the run finished for this worker?). What
    holds models back and provider batches it reaches through their stores, ``holding`` and ``batching``."""

    async def counts(self, *, open_only: bool = False) -> list[JobCounts]: ...
    @property
    def holding(self) -> HoldingBack: ...
    @property
    def batching(self) -> Batching: ...


class Queue(Claiming, Recording, RunBookkeeping, Reading, Protocol):
    """Every role of the jobs at once, and the stores beside them: what the planner, finaliser and CLI may
    ask of a run's database (the worker takes ``WorkerQueue``)."""

    @property
    def holding(self) -> HoldingBack: ...
    @property
    def batching(self) -> Batching: ...
    async def close(self) -> None: ...
    async def __aenter__(self) -> Queue: ...
    async def __aexit__(self, *exc: object) -> None: ...
