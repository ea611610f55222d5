"""In-memory queue for tests: the same contract as the SQL backends, in one process's dicts."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Any, cast

from ..crashpoints import crashpoint
from ..jobs import WHOLE_RUN, Cell, Items, Job
from .answers import AnswerPage, AnswerQuery, answer_page, spend_of
from .batches import MemoryBatches
from .budget import MemoryBudget
from .controls import MemoryControls
from .roles import (
    ASIDE,
    SET_ASIDE,
    ClaimQuota,
    Failure,
    JobCounts,
    JobResult,
    JobStatus,
    ModelTally,
    aside_status,
    live_status,
)
from .tallies import tallies_of

__all__ = ["MemoryQueue"]


@dataclass
class _Row:
    job: Job
    status: str = "pending"
    attempts: int = 0
    lease_owner: str | None = None
    lease_expires: float = 0.0
    result: dict[str, Any] | None = None
    error: str | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    done_at: float = 0.0


def _in(job: Job, cells: Sequence[Cell]) -> bool:
    """Whether a job is in one of ``cells`` (its scenario, and model and mode when a cell names them)."""
    return any(
        cell == WHOLE_RUN
        or (
            job.scenario_id == cell.scenario
            and (cell.model_id is None or (job.model_id, job.mode) == (cell.model_id, cell.mode))
        )
        for cell in cells
    )


class MemoryQueue(MemoryBatches, MemoryControls, MemoryBudget):
    """A ``Queue`` held in memory; shared by nothing, lost on exit."""

    def __init__(self, run: str) -> None:
        MemoryControls.__init__(self)
        MemoryBudget.__init__(self)
        self.run = run
        self._info: dict[str, Any] | None = None
        self._rows: dict[str, _Row] = {}
        self._items: Items = {}
        self._workers: dict[str, dict[str, Any]] = {}
        self._stages: dict[str, str] = {}  # stage -> the process that plans it
        self._claim_keys: dict[str, list[str]] = {}  # a named claim -> the jobs it leased
        self._init_batches()

    async def init_run(self, config_text: str, meta: dict[str, Any]) -> dict[str, Any]:
        if self._info is None:
            self._info = {
                "name": self.run,
                "config_text": config_text,
                "meta": meta,
                "created_at": time.time(),
                "finalized_at": None,
                "finalized_by": None,
            }
        self._info["config_text"] = config_text  # a rerun records its config; the first meta stays
        return self._info

    async def run_info(self) -> dict[str, Any] | None:
        return self._info

    async def update_meta(self, patch: dict[str, Any]) -> dict[str, Any]:
        assert self._info is not None, "init_run first"
        self._info["meta"] = {**self._info["meta"], **patch}
        return dict(self._info["meta"])

    async def merge_meta(self, key: str, merge: Callable[[Any], Any]) -> Any:
        assert self._info is not None, "init_run first"
        self._info["meta"] = {**self._info["meta"], key: merge(self._info["meta"].get(key))}
        return self._info["meta"][key]

    async def set_draws(self, scenario_id: str, draws: dict[str, int]) -> int:
        changed = 0
        for row in self._rows.values():
            place = draws.get(row.job.item) if row.job.scenario_id == scenario_id else None
            if place is not None and place != row.job.draw:
                row.job, changed = replace(row.job, draw=place), changed + 1
        return changed

    async def enqueue(
        self,
        jobs: Iterable[Job],
        items: Items,
        *,
        whole_plan: AbstractSet[str] | None = None,
        cells: Sequence[Cell] | None = None,
        keep: AbstractSet[str] = frozenset(),
    ) -> int:
        for key, payload in items.items():
            self._items.setdefault(key, payload)
        jobs = list(jobs)
        if whole_plan is not None:
            cells, keep = [WHOLE_RUN], whole_plan
        changed = added = 0
        if cells is not None:
            plan = {job.id for job in jobs} | keep
            for row in self._rows.values():
                aside = row.status.startswith(ASIDE)
                if (aside and row.job.id in plan) or (
                    not aside and row.job.id not in plan and _in(row.job, cells)
                ):
                    row.status = live_status(row.status) if aside else aside_status(row.status)
                    row.lease_owner = None
                    changed += 1
        for job in jobs:
            if job.id not in self._rows:
                self._rows[job.id] = _Row(job)
                added += 1
        if (added or changed) and self._info is not None:
            self._info.update(finalized_at=None, finalized_by=None)
        return added

    async def claim(
        self, worker: str, n: int, lease_s: float, exclude_models: frozenset[str] = frozenset()
    ) -> list[Job]:
        now = time.time()
        out: list[Job] = []
        for row in sorted(self._rows.values(), key=lambda r: (r.job.draw, r.job.id)):
            if len(out) >= n:
                break
            if row.job.model_id in exclude_models:
                continue
            if row.status == "pending" or (row.status == "running" and row.lease_expires < now):
                row.status, row.lease_owner, row.lease_expires = "running", worker, now + lease_s
                row.attempts += 1
                out.append(replace(row.job, attempts=row.attempts))
        return out

    async def claim_each(
        self, worker: str, quotas: Sequence[ClaimQuota], lease_s: float, *, key: str | None = None
    ) -> list[Job]:
        if key is not None and key in self._claim_keys:  # sent again: the jobs it leased, still ours
            rows = [self._rows[i] for i in self._claim_keys[key]]
            mine = [r for r in rows if r.status == "running" and r.lease_owner == worker]
            return [replace(r.job, attempts=r.attempts) for r in mine]
        out = self._claim_each(worker, quotas, lease_s)
        if key is not None:
            self._claim_keys[key] = [job.id for job in out]
        return out

    def _claim_each(self, worker: str, quotas: Sequence[ClaimQuota], lease_s: float) -> list[Job]:
        now = time.time()
        left = {model: i for i, q in enumerate(quotas) if q.n > 0 for model in q.models}
        room = [q.n for q in quotas]
        out: list[Job] = []
        for row in sorted(self._rows.values(), key=lambda r: (r.job.draw, r.job.id)):
            i = left.get(row.job.model_id)
            if i is None or room[i] <= 0:
                continue
            if row.status == "pending" or (row.status == "running" and row.lease_expires < now):
                row.status, row.lease_owner, row.lease_expires = "running", worker, now + lease_s
                row.attempts += 1
                room[i] -= 1
                out.append(replace(row.job, attempts=row.attempts))
                if not any(room):
                    break
        return out

    async def heartbeat(self, worker: str, lease_s: float) -> int:
        until, n = time.time() + lease_s, 0
        for row in self._rows.values():
            if row.status == "running" and row.lease_owner == worker:
                row.lease_expires, n = until, n + 1
        if worker in self._workers:
            self._workers[worker]["heartbeat_at"] = time.time()
        return n

    async def complete(self, worker: str, results: list[tuple[str, dict[str, Any]]]) -> int:
        n = 0
        for job_id, result in results:
            row = self._rows.get(job_id)
            if row is None or row.status == "done" or row.status.startswith(ASIDE):
                continue
            row.status, row.result, row.error, row.lease_owner = "done", result, None, None
            row.done_at = time.time()
            n += 1
        if worker in self._workers:
            self._workers[worker]["jobs_done"] += n
            self._workers[worker]["heartbeat_at"] = time.time()
        return n

    async def fail(self, worker: str, failures: list[Failure]) -> int:
        n = 0
        for f in failures:
            row = self._rows.get(f.job_id)
            if row is None or row.status == "done":
                continue
            if any(e["attempt"] == row.attempts and e["worker"] == worker for e in row.errors):
                continue  # recorded already (sent again after a reply lost in an outage)
            row.errors.append({"attempt": row.attempts, "worker": worker, "kind": f.kind, "error": f.error})
            if row.status != "running" or row.lease_owner != worker:
                continue  # the lease moved on: the attempt is kept, the job is not ours
            row.error, row.lease_owner = f.error, None
            row.status = "failed" if f.final else "pending"
            n += 1
        return n

    async def release(self, worker: str, job_ids: list[str]) -> int:
        n = 0
        for job_id in job_ids:
            row = self._rows.get(job_id)
            if row is not None and row.status == "running" and row.lease_owner == worker:
                row.status, row.lease_owner, row.attempts = "pending", None, max(0, row.attempts - 1)
                n += 1
        return n

    async def release_unheld(self, worker: str, held: AbstractSet[str]) -> list[str]:
        lost = sorted(
            i for i, row in self._rows.items() if row.status == "running" and row.lease_owner == worker
        )
        lost = [i for i in lost if i not in held]
        await self.release(worker, lost)
        return lost

    async def take_stage(self, stage: str, worker: str) -> str:
        return self._stages.setdefault(stage, worker)

    async def take_finalize(self, worker: str) -> bool:
        if self._info is None or self._info["finalized_at"] is not None:
            return False
        out = {m for m, state in self._controls if state == "screened"}  # their pending jobs wait
        if any(
            r.status == "running" or (r.status == "pending" and r.job.model_id not in out)
            for r in self._rows.values()
        ):
            return False
        self._info.update(finalized_at=time.time(), finalized_by=worker)
        return True

    async def release_finalize(self, worker: str) -> None:
        if self._info is not None and self._info["finalized_by"] == worker:
            self._info.update(finalized_at=None, finalized_by=None)

    async def requeue_expired(self, stale_after_s: float | None = None) -> int:
        now, n = time.time(), 0
        stale = set()
        if stale_after_s is not None:
            stale = {w for w, row in self._workers.items() if row["heartbeat_at"] < now - stale_after_s}
        for row in self._rows.values():
            if row.status == "running" and (row.lease_expires < now or row.lease_owner in stale):
                row.status, row.lease_owner, n = "pending", None, n + 1
        return n

    async def requeue_failed(self) -> int:
        n = 0
        for row in self._rows.values():
            if row.status == "failed":
                row.status, row.attempts, n = "pending", 0, n + 1
        if n and self._info is not None:
            self._info.update(finalized_at=None, finalized_by=None)
        return n

    async def counts(self, *, open_only: bool = False) -> list[JobCounts]:
        tally: dict[tuple[str, str, str, str], int] = {}
        for row in self._rows.values():
            if open_only and row.status not in ("pending", "running"):
                continue
            status = SET_ASIDE if row.status.startswith(ASIDE) else row.status
            key = (row.job.model_id, row.job.mode, row.job.scenario_id, status)
            tally[key] = tally.get(key, 0) + 1
        return [JobCounts(*k, n) for k, n in sorted(tally.items())]

    async def status_totals(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in await self.counts():
            out[c.status] = out.get(c.status, 0) + c.n
        return dict(sorted(out.items()))

    async def done_lately(self, seconds: float) -> dict[str, tuple[int, float]]:
        now, found = time.time(), dict[str, tuple[int, float]]()
        for row in self._rows.values():
            if row.status == "done" and row.done_at >= now - seconds:
                n, age = found.get(row.job.model_id, (0, 0.0))
                found[row.job.model_id] = (n + 1, max(age, now - row.done_at))
        return found

    async def results(
        self, scenarios: AbstractSet[str] | None = None, *, status: JobStatus | None = None
    ) -> list[JobResult]:
        return [
            JobResult(replace(r.job, attempts=r.attempts), cast(JobStatus, r.status), r.result, r.error)
            for r in sorted(self._rows.values(), key=lambda r: r.job.id)
            if not r.status.startswith(ASIDE)
            and (scenarios is None or r.job.scenario_id in scenarios)
            and (status is None or r.status == status)
        ]

    async def job_ids(self) -> dict[tuple[str, str], list[str]]:
        out: dict[tuple[str, str], list[str]] = {}
        for r in await self.results():
            out.setdefault((r.job.scenario_id, r.job.model_id), []).append(r.job.id)
        return out

    async def results_of(self, ids: Sequence[str]) -> list[JobResult]:
        wanted = set(ids)
        return [r for r in await self.results() if r.job.id in wanted]

    def _done(self) -> list[tuple[Job, dict[str, Any]]]:
        return [(r.job, r.result) for r in self._rows.values() if r.status == "done" and r.result is not None]

    async def answers(self, query: AnswerQuery) -> AnswerPage:
        return answer_page(self._done(), query)

    async def spend(self) -> dict[str, float]:
        return spend_of(self._done())

    async def model_tallies(self) -> dict[str, ModelTally]:
        return tallies_of(
            (r.job.model_id, r.status, r.result, r.job.scenario_id) for r in self._rows.values()
        )

    async def attempt_errors(self, job_id: str) -> list[dict[str, Any]]:
        row = self._rows.get(job_id)
        return list(row.errors) if row else []

    async def items(self, scenario_id: str | None = None, *, of_open_jobs: bool = False) -> Items:
        wanted = {
            (r.job.scenario_id, r.job.item)
            for r in self._rows.values()
            if r.status in ("pending", "running", "failed")
        }
        return {
            k: v
            for k, v in self._items.items()
            if (scenario_id is None or k[0] == scenario_id) and (not of_open_jobs or k in wanted)
        }

    async def record(
        self,
        worker: str,
        results: list[tuple[str, dict[str, Any]]],
        failures: list[Failure],
    ) -> int:
        crashpoint("record")
        return await self.complete(worker, results) + await self.fail(worker, failures)

    async def register_worker(self, worker: str) -> None:
        now = time.time()
        self._workers.setdefault(
            worker,
            {
                "id": worker,
                "run": self.run,
                "host": "memory",
                "pid": 0,
                "started_at": now,
                "heartbeat_at": now,
                "jobs_done": 0,
                "stopped_at": None,
            },
        )

    async def stop_worker(self, worker: str) -> None:
        if worker in self._workers:
            self._workers[worker]["stopped_at"] = time.time()

    async def workers(self) -> list[dict[str, Any]]:
        now = time.time()
        return [{**w, "heartbeat_age_s": max(0.0, now - w["heartbeat_at"])} for w in self._workers.values()]

    async def close(self) -> None:
        return None

    async def __aenter__(self) -> MemoryQueue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
