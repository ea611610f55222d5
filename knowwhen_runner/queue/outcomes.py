"""Outcomes of ``SqlQueue``: results and failures recorded, and read back (counts, errors, results).

A mixin, like the others of ``sql``: it uses the queue's ``_call``, ``_engine``, ``_clock``, ``_placeholder``
and ``_bulk``. A batch of results and failures is one transaction, serialised before it begins.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import orjson
from sqlalchemy import String, bindparam, func, select, text, update

from ..crashpoints import crashpoint
from . import schema as s
from .claims import JOB_COLUMNS, job_from_row
from .engine import RunStatements, on_db_thread
from .roles import ASIDE, SET_ASIDE, Failure, JobCounts, JobResult, JobStatus
from .tallies import BY_TIME, tally_values

__all__ = ["OutcomeTables"]

_COMPLETABLE = "('pending', 'running', 'failed')"  # not done, not set aside
_BY_KEY = 500  # ids bound in one statement of ``results_of`` (well under every driver's limit)

# The batch is a sorted (so materialised) subquery and the status test is kept off the indexes (``+``):
# the planner then walks the batch and finds each job by its primary key. Without both it walks all the
# run's jobs once per batch row (0.5 s for 50 rows of 20,000). ``tests/unit/test_sql_plans.py`` pins it.
# Each result's tally values (``tally_values``) are written with it, in the same statement.
_SQLITE_COMPLETE = (
    "UPDATE kw_jobs SET status = 'done', result = j.result, cost_usd = j.cost, called = j.called, "
    "cache_hit = j.hit, error = NULL, lease_owner = NULL, updated_at = ? "
    "FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS result, "
    "json_extract(value, '$[2]') AS cost, json_extract(value, '$[3]') AS called, "
    "json_extract(value, '$[4]') AS hit FROM json_each(?) ORDER BY 1) AS j "
    f"WHERE kw_jobs.run = ? AND kw_jobs.id = j.id AND +kw_jobs.status IN {_COMPLETABLE}"
)


class OutcomeTables(RunStatements):
    """Recording and reading back the outcomes of ``SqlQueue``'s jobs."""

    async def complete(self, worker: str, results: list[tuple[str, dict[str, Any]]]) -> int:
        return await self.record(worker, results, [])

    async def fail(self, worker: str, failures: list[Failure]) -> int:
        return await self.record(worker, [], failures)

    async def record(
        self,
        worker: str,
        results: list[tuple[str, dict[str, Any]]],
        failures: list[Failure],
    ) -> int:
        if not (results or failures):
            return 0
        return await self._call(self._record, worker, results, failures)

    def _record(
        self,
        worker: str,
        results: list[tuple[str, dict[str, Any]]],
        failures: list[Failure],
    ) -> int:
        """Results and failures in one transaction: one lock taken per batch, not two.

        Everything is serialised before the transaction begins, so the write lock is held for the
        statements alone (on SQLite, one statement per table: see ``_bulk``).
        """
        stamp = self._clock.params()["now"]
        done_rows = [(jid, orjson.dumps(r).decode(), *tally_values(r)) for jid, r in results]
        with self._engine.begin() as conn:
            crashpoint("record")  # a kill here rolls the whole batch back (its responses are in the cache)
            recorded = self._complete_in(conn, worker, done_rows, stamp) if done_rows else 0
            for f in failures:
                recorded += self._fail_one(conn, worker, f)
        return recorded

    def _complete_in(self, conn: Any, worker: str, rows: list[tuple[Any, ...]], stamp: float) -> int:
        """Mark ``rows`` (id, result JSON, cost, called, cache hit) done, with their tally values."""
        if self._bulk:
            sql = _SQLITE_COMPLETE
            recorded = int(conn.exec_driver_sql(sql, (stamp, orjson.dumps(rows).decode(), self.run)).rowcount)
        else:
            ph = self._placeholder
            sqlite_now = self.dialect == "sqlite"
            now = ph if sqlite_now else self._clock.sql
            sql = (
                f"UPDATE kw_jobs SET status = 'done', result = {ph}, cost_usd = {ph}, called = {ph}, "
                f"cache_hit = {ph}, error = NULL, lease_owner = NULL, updated_at = {now} "
                f"WHERE run = {ph} AND id = {ph} AND status IN {_COMPLETABLE}"
            )
            params = [
                (r, cost, called, hit, *((stamp,) if sqlite_now else ()), self.run, jid)
                for jid, r, cost, called, hit in rows
            ]
            # The driver's executemany: its rowcount is the total of rows changed (sqlite3 and psycopg 3).
            recorded = int(conn.exec_driver_sql(sql, params).rowcount or 0)
        conn.execute(
            update(s.workers)
            .where(s.workers.c.id == worker)
            .values(jobs_done=s.workers.c.jobs_done + recorded, heartbeat_at=self._clock.expr())
        )
        return recorded

    def _fail_one(self, conn: Any, worker: str, f: Failure) -> int:
        current = conn.execute(
            select(s.jobs.c.status, s.jobs.c.attempts, s.jobs.c.lease_owner).where(
                s.jobs.c.run == self.run, s.jobs.c.id == f.job_id
            )
        ).first()
        if current is None or current.status == "done":
            return 0
        a = s.attempts
        seen = conn.execute(
            select(a.c.attempt).where(
                a.c.run == self.run,
                a.c.job_id == f.job_id,
                a.c.attempt == current.attempts,
                a.c.worker == worker,
            )
        ).first()
        if seen is not None:
            return 0  # this failure is recorded already (sent again after a reply lost in an outage)
        conn.execute(
            s.attempts.insert().values(
                run=self.run,
                job_id=f.job_id,
                attempt=current.attempts,
                worker=worker,
                kind=f.kind,
                error=f.error,
                at=self._clock.expr(),
            )
        )
        if current.status != "running" or current.lease_owner != worker:
            return 0  # the lease expired and moved on: the attempt is kept, the job is not ours
        conn.execute(
            update(s.jobs)
            .where(s.jobs.c.run == self.run, s.jobs.c.id == f.job_id)
            .values(
                status="failed" if f.final else "pending",
                error=f.error,
                lease_owner=None,
                updated_at=self._clock.expr(),
            )
        )
        return 1

    @on_db_thread
    def attempt_errors(self, job_id: str) -> list[dict[str, Any]]:
        q = (
            select(s.attempts.c.attempt, s.attempts.c.worker, s.attempts.c.kind, s.attempts.c.error)
            .where(s.attempts.c.run == self.run, s.attempts.c.job_id == job_id)
            .order_by(s.attempts.c.at)
        )
        with self._reading() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    @on_db_thread
    def counts(self, *, open_only: bool = False) -> list[JobCounts]:
        c = s.jobs.c
        q = (
            select(c.model_id, c.mode, c.scenario, c.status, func.count())
            .where(c.run == self.run)
            .group_by(c.model_id, c.mode, c.scenario, c.status)
            .order_by(c.model_id, c.mode, c.scenario, c.status)
        )
        if open_only:  # the status index finds the open jobs alone: the cost follows the work left
            q = q.where(c.status.in_(("pending", "running")))
        tally: dict[tuple[str, str, str, str], int] = {}
        with self._reading() as conn:
            for model, mode, scenario, status, n in conn.execute(q):
                key = (model, mode, scenario, SET_ASIDE if status.startswith(ASIDE) else status)
                tally[key] = tally.get(key, 0) + n
        return [JobCounts(*k, n) for k, n in sorted(tally.items())]

    @on_db_thread
    def status_totals(self) -> dict[str, int]:
        # Read from the (run, status) index alone, never the rows: a count, not a scan of results.
        q = text("SELECT status, count(*) FROM kw_jobs WHERE run = :run GROUP BY status")
        out: dict[str, int] = {}
        with self._reading() as conn:
            for status, n in conn.execute(q, {"run": self.run}):
                key = SET_ASIDE if status.startswith(ASIDE) else status
                out[key] = out.get(key, 0) + int(n)
        return dict(sorted(out.items()))

    @on_db_thread
    def done_lately(self, seconds: float) -> dict[str, tuple[int, float]]:
        now = self._clock.sql
        by = BY_TIME if self.dialect == "sqlite" else ""  # a range of done jobs by time, not all of them
        q = text(
            f"SELECT model_id, count(*), {now} - min(updated_at) FROM kw_jobs{by} WHERE run = :run "
            f"AND status = 'done' AND updated_at >= {now} - :s GROUP BY model_id"
        )
        with self._reading() as conn:
            rows = conn.execute(q, self._params(s=seconds)).fetchall()
        return {model: (int(n), max(0.0, float(age))) for model, n, age in rows}

    @on_db_thread
    def results(
        self, scenarios: AbstractSet[str] | None = None, *, status: JobStatus | None = None
    ) -> list[JobResult]:
        only = " AND scenario IN :scenarios" if scenarios is not None else ""
        # One status: the partial index of open jobs (pending) or the status index finds them, and a
        # resume with most jobs done reads only the few left, never the results of the others.
        which = "status = :status" if status is not None else f"status NOT LIKE '{ASIDE}%'"
        q = text(
            f"SELECT {JOB_COLUMNS}, status, result, error FROM kw_jobs WHERE run = :run "
            f"AND {which}{only} ORDER BY id"
        )
        params: dict[str, Any] = {"run": self.run, "status": status}
        if scenarios is not None:
            q = q.bindparams(bindparam("scenarios", expanding=True, type_=String))
            params["scenarios"] = sorted(scenarios)
        with self._reading() as conn:
            rows = conn.execute(q, params).fetchall()
        return [JobResult(job_from_row(r), r[7], orjson.loads(r[8]) if r[8] else None, r[9]) for r in rows]

    @on_db_thread
    def job_ids(self) -> dict[tuple[str, str], list[str]]:
        # Three short columns of each job, never its result: a finaliser groups the plan by cell with it.
        q = text(
            f"SELECT scenario, model_id, id FROM kw_jobs WHERE run = :run AND status NOT LIKE '{ASIDE}%' "
            "ORDER BY id"
        )
        out: dict[tuple[str, str], list[str]] = {}
        with self._reading() as conn:
            for scenario, model_id, job_id in conn.execute(q, {"run": self.run}):
                out.setdefault((scenario, model_id), []).append(job_id)
        return out

    @on_db_thread
    def results_of(self, ids: Sequence[str]) -> list[JobResult]:
        q = text(
            f"SELECT {JOB_COLUMNS}, status, result, error FROM kw_jobs WHERE run = :run "
            f"AND id IN :ids AND status NOT LIKE '{ASIDE}%'"
        ).bindparams(bindparam("ids", expanding=True, type_=String))
        rows: list[Any] = []
        with self._reading() as conn:
            for at in range(0, len(ids), _BY_KEY):  # each job found by its key, a page of keys at a time
                rows += conn.execute(q, {"run": self.run, "ids": list(ids[at : at + _BY_KEY])}).fetchall()
        rows.sort(key=lambda r: r[0])
        return [JobResult(job_from_row(r), r[7], orjson.loads(r[8]) if r[8] else None, r[9]) for r in rows]
