"""The SQL queue: one implementation for SQLite (default) and PostgreSQL (many machines).

SQLAlchemy Core runs on one background thread per process (anyio.to_thread with a limiter of one), so
the event loop never blocks on the database and one connection's transactions never interleave.
SQLite runs in WAL mode and takes its write lock at BEGIN, so two processes on one file wait for each
other. PostgreSQL claims with ``FOR UPDATE SKIP LOCKED`` in a CTE over a partial index of pending jobs,
and keeps leases on the database server's clock (see ``engine.py``).
"""

from __future__ import annotations

import time
from typing import Any, TypeVar

import orjson
from sqlalchemy import func, select, text, update
from sqlalchemy.dialects import postgresql, sqlite

from ..exceptions import QueueError
from ..jobs import Job
from . import Failure, JobCounts
from . import schema as s
from .engine import DbClock, make_engine, safe_url
from .side_tables import SideTables

__all__ = ["SqlQueue", "safe_url"]

T = TypeVar("T")

_JOB_COLUMNS = "id, model_id, mode, scenario, item, payload, attempts"
_OPEN = "('pending', 'running')"


def _job(row: Any) -> Job:
    return Job(
        id=row[0],
        model_id=row[1],
        mode=row[2],
        scenario_id=row[3],
        item=row[4],
        payload=orjson.loads(row[5]),
        attempts=row[6],
    )


class SqlQueue(SideTables):
    """A ``Queue`` in a SQLite file or a PostgreSQL database."""

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

    def single_run_name(self) -> str:
        """The name of the only run in this database (for commands given just a run folder)."""
        names = self._guarded(self._run_names)
        if len(names) != 1:
            found = ", ".join(names) or "none"
            raise QueueError(f"{safe_url(self.url)}: expected one run, found {found}; name one with --run")
        return names[0]

    def _run_names(self) -> list[str]:
        with self._engine.begin() as conn:
            return [r[0] for r in conn.execute(select(s.runs.c.name).order_by(s.runs.c.name))]

    # -- runs and items -------------------------------------------------------------------------------

    async def init_run(self, config_text: str, meta: dict[str, Any]) -> dict[str, Any]:
        return await self._call(self._init_run, config_text, meta)

    def _init_run(self, config_text: str, meta: dict[str, Any]) -> dict[str, Any]:
        with self._engine.begin() as conn:
            stmt = self._insert(s.runs).values(
                name=self.run,
                config_text=config_text,
                meta=orjson.dumps(meta).decode(),
                created_at=self._clock.expr(),
            )
            conn.execute(stmt.on_conflict_do_nothing())
        info = self._run_info()
        assert info is not None
        return info

    async def run_info(self) -> dict[str, Any] | None:
        return await self._call(self._run_info)

    def _run_info(self) -> dict[str, Any] | None:
        with self._engine.begin() as conn:
            row = conn.execute(select(s.runs).where(s.runs.c.name == self.run)).first()
        if row is None:
            return None
        return {
            "name": row.name,
            "config_text": row.config_text,
            "meta": orjson.loads(row.meta),
            "created_at": row.created_at,
            "finalized_at": row.finalized_at,
            "finalized_by": row.finalized_by,
        }

    async def enqueue(self, jobs: list[Job], items: dict[tuple[str, str], dict[str, Any]]) -> int:
        return await self._call(self._enqueue, jobs, items)

    def _enqueue(self, jobs: list[Job], items: dict[tuple[str, str], dict[str, Any]]) -> int:
        # Resume is the common case (most jobs already there): read what exists, insert only the rest,
        # through the driver's executemany (SQLAlchemy's per-row parameter handling costs seconds at 150k).
        ph = self._placeholder
        with self._engine.begin() as conn:
            have_items = {
                (r[0], r[1])
                for r in conn.exec_driver_sql(
                    f"SELECT scenario, item FROM kw_items WHERE run = {ph}", (self.run,)
                )
            }
            new_items = [
                (self.run, sc, it, orjson.dumps(p).decode())
                for (sc, it), p in items.items()
                if (sc, it) not in have_items
            ]
            have_jobs = {
                r[0] for r in conn.exec_driver_sql(f"SELECT id FROM kw_jobs WHERE run = {ph}", (self.run,))
            }
            new_jobs = []
            for j in jobs:
                if j.id not in have_jobs:
                    have_jobs.add(j.id)
                    payload = orjson.dumps(j.payload).decode()
                    new_jobs.append((self.run, j.id, j.model_id, j.mode, j.scenario_id, j.item, payload))
            conflict = " ON CONFLICT DO NOTHING"
            for chunk in range(0, len(new_items), 5000):
                conn.exec_driver_sql(
                    f"INSERT INTO kw_items (run, scenario, item, payload) VALUES ({ph}, {ph}, {ph}, {ph}){conflict}",
                    new_items[chunk : chunk + 5000],
                )
            for chunk in range(0, len(new_jobs), 5000):
                conn.exec_driver_sql(
                    "INSERT INTO kw_jobs (run, id, model_id, mode, scenario, item, payload, status, attempts) "
                    f"VALUES ({ph}, {ph}, {ph}, {ph}, {ph}, {ph}, {ph}, 'pending', 0){conflict}",
                    new_jobs[chunk : chunk + 5000],
                )
            added = len(new_jobs)
            if added:
                self._unmark_finalized(conn)
        return added

    @property
    def _placeholder(self) -> str:
        return "?" if self.dialect == "sqlite" else "%s"

    def _unmark_finalized(self, conn: Any) -> None:
        conn.execute(
            update(s.runs).where(s.runs.c.name == self.run).values(finalized_at=None, finalized_by=None)
        )

    async def items(self, scenario_id: str | None = None) -> dict[tuple[str, str], dict[str, Any]]:
        return await self._call(self._items, scenario_id)

    def _items(self, scenario_id: str | None) -> dict[tuple[str, str], dict[str, Any]]:
        q = select(s.items.c.scenario, s.items.c.item, s.items.c.payload).where(s.items.c.run == self.run)
        if scenario_id is not None:
            q = q.where(s.items.c.scenario == scenario_id)
        with self._engine.begin() as conn:
            return {(r[0], r[1]): orjson.loads(r[2]) for r in conn.execute(q)}

    # -- claims and leases ----------------------------------------------------------------------------

    async def claim(
        self, worker: str, n: int, lease_s: float, exclude_models: frozenset[str] = frozenset()
    ) -> list[Job]:
        return await self._call(self._claim, worker, n, lease_s, exclude_models)

    def _claim_sql(self, exclude: frozenset[str], params: dict[str, Any]) -> tuple[str, str]:
        """The two statements of a claim: return expired leases to pending, then lease up to n jobs."""
        now = self._clock.sql
        names = []
        for i, model in enumerate(sorted(exclude)):
            params[f"x{i}"] = model
            names.append(f":x{i}")
        excl = f" AND model_id NOT IN ({', '.join(names)})" if names else ""
        lease = f"status = 'running', lease_owner = :w, lease_expires = {now} + :lease, updated_at = {now}"
        if self.dialect == "postgresql":
            # MATERIALIZED: the CTE runs once, so a claim takes at most n rows (a plain IN (subquery ...
            # SKIP LOCKED) may be re-evaluated by the planner and take more).
            expire = (
                "WITH gone AS MATERIALIZED (SELECT id FROM kw_jobs WHERE run = :run AND status = 'running' "
                f"AND lease_expires < {now} FOR UPDATE SKIP LOCKED) UPDATE kw_jobs j SET status = 'pending', "
                "lease_owner = NULL FROM gone WHERE j.run = :run AND j.id = gone.id"
            )
            claim = (
                "WITH picked AS MATERIALIZED (SELECT id FROM kw_jobs WHERE run = :run AND status = 'pending'"
                f"{excl} ORDER BY id LIMIT :n FOR UPDATE SKIP LOCKED) UPDATE kw_jobs j SET {lease}, "
                "attempts = j.attempts + 1 FROM picked WHERE j.run = :run AND j.id = picked.id RETURNING "
                + ", ".join(f"j.{c.strip()}" for c in _JOB_COLUMNS.split(","))
            )
            return expire, claim
        # SQLite: BEGIN IMMEDIATE already serialises claims, so a plain subquery is exact.
        expire = (
            "UPDATE kw_jobs SET status = 'pending', lease_owner = NULL WHERE run = :run "
            f"AND status = 'running' AND lease_expires < {now}"
        )
        claim = (
            f"UPDATE kw_jobs SET {lease}, attempts = attempts + 1 WHERE run = :run AND id IN "
            f"(SELECT id FROM kw_jobs WHERE run = :run AND status = 'pending'{excl} ORDER BY id LIMIT :n) "
            f"RETURNING {_JOB_COLUMNS}"
        )
        return expire, claim

    def _claim(self, worker: str, n: int, lease_s: float, exclude: frozenset[str]) -> list[Job]:
        params = self._params(w=worker, lease=lease_s, n=n)
        expire, claim = self._claim_sql(exclude, params)
        with self._engine.begin() as conn:
            # A killed worker's expired leases return to pending in the claim's own transaction.
            conn.execute(text(expire), params)
            rows = conn.execute(text(claim), params).fetchall()
        return sorted((_job(r) for r in rows), key=lambda j: j.id)

    async def heartbeat(self, worker: str, lease_s: float) -> int:
        return await self._call(self._heartbeat, worker, lease_s)

    def _heartbeat(self, worker: str, lease_s: float) -> int:
        now = self._clock.expr()
        with self._engine.begin() as conn:
            res = conn.execute(
                update(s.jobs)
                .where(s.jobs.c.run == self.run, s.jobs.c.lease_owner == worker, s.jobs.c.status == "running")
                .values(lease_expires=now + lease_s)
            )
            conn.execute(update(s.workers).where(s.workers.c.id == worker).values(heartbeat_at=now))
        return int(res.rowcount or 0)

    async def release(self, worker: str, job_ids: list[str]) -> int:
        return await self._call(self._release, worker, job_ids)

    def _release(self, worker: str, job_ids: list[str]) -> int:
        if not job_ids:
            return 0
        greatest = func.max if self.dialect == "sqlite" else func.greatest
        with self._engine.begin() as conn:
            res = conn.execute(
                update(s.jobs)
                .where(
                    s.jobs.c.run == self.run,
                    s.jobs.c.id.in_(job_ids),
                    s.jobs.c.lease_owner == worker,
                    s.jobs.c.status == "running",
                )
                .values(status="pending", lease_owner=None, attempts=greatest(s.jobs.c.attempts - 1, 0))
            )
        return int(res.rowcount or 0)

    async def requeue_expired(self) -> int:
        return await self._call(self._requeue_expired)

    def _requeue_expired(self) -> int:
        with self._engine.begin() as conn:
            res = conn.execute(
                update(s.jobs)
                .where(
                    s.jobs.c.run == self.run,
                    s.jobs.c.status == "running",
                    s.jobs.c.lease_expires < self._clock.expr(),
                )
                .values(status="pending", lease_owner=None)
            )
        return int(res.rowcount or 0)

    async def requeue_failed(self) -> int:
        return await self._call(self._requeue_failed)

    def _requeue_failed(self) -> int:
        with self._engine.begin() as conn:
            res = conn.execute(
                update(s.jobs)
                .where(s.jobs.c.run == self.run, s.jobs.c.status == "failed")
                .values(status="pending", attempts=0, lease_owner=None)
            )
            n = int(res.rowcount or 0)
            if n:
                self._unmark_finalized(conn)
        return n

    # -- outcomes -------------------------------------------------------------------------------------

    async def complete(self, worker: str, results: list[tuple[str, dict[str, Any]]]) -> int:
        return await self._call(self._complete, worker, results) if results else 0

    def _complete(self, worker: str, results: list[tuple[str, dict[str, Any]]]) -> int:
        ph = self._placeholder
        sqlite_now = self.dialect == "sqlite"
        now = ph if sqlite_now else self._clock.sql
        sql = (
            f"UPDATE kw_jobs SET status = 'done', result = {ph}, error = NULL, lease_owner = NULL, "
            f"updated_at = {now} WHERE run = {ph} AND id = {ph} AND status <> 'done'"
        )
        stamp = time.time()
        rows = [
            (orjson.dumps(r).decode(), *((stamp,) if sqlite_now else ()), self.run, jid) for jid, r in results
        ]
        with self._engine.begin() as conn:
            # The driver's executemany: its rowcount is the total of rows changed (sqlite3 and psycopg 3).
            recorded = int(conn.exec_driver_sql(sql, rows).rowcount or 0)
            conn.execute(
                update(s.workers)
                .where(s.workers.c.id == worker)
                .values(jobs_done=s.workers.c.jobs_done + recorded, heartbeat_at=self._clock.expr())
            )
        return recorded

    async def fail(self, worker: str, failures: list[Failure]) -> int:
        return await self._call(self._fail, worker, failures) if failures else 0

    def _fail(self, worker: str, failures: list[Failure]) -> int:
        n = 0
        with self._engine.begin() as conn:
            for f in failures:
                current = conn.execute(
                    select(s.jobs.c.status, s.jobs.c.attempts, s.jobs.c.lease_owner).where(
                        s.jobs.c.run == self.run, s.jobs.c.id == f.job_id
                    )
                ).first()
                if current is None or current.status == "done":
                    continue
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
                    continue  # the lease expired and moved on: the attempt is kept, the job is not ours
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
                n += 1
        return n

    async def take_finalize(self, worker: str) -> bool:
        return await self._call(self._take_finalize, worker)

    def _take_finalize(self, worker: str) -> bool:
        stmt = text(
            f"UPDATE kw_runs SET finalized_at = {self._clock.sql}, finalized_by = :w WHERE name = :run "
            "AND finalized_at IS NULL AND NOT EXISTS (SELECT 1 FROM kw_jobs WHERE run = :run "
            f"AND status IN {_OPEN})"
        )
        with self._engine.begin() as conn:
            return bool(conn.execute(stmt, self._params(w=worker)).rowcount)

    async def release_finalize(self, worker: str) -> None:
        await self._call(self._release_finalize, worker)

    def _release_finalize(self, worker: str) -> None:
        with self._engine.begin() as conn:
            conn.execute(
                update(s.runs)
                .where(s.runs.c.name == self.run, s.runs.c.finalized_by == worker)
                .values(finalized_at=None, finalized_by=None)
            )

    async def attempt_errors(self, job_id: str) -> list[dict[str, Any]]:
        return await self._call(self._attempt_errors, job_id)

    def _attempt_errors(self, job_id: str) -> list[dict[str, Any]]:
        q = (
            select(s.attempts.c.attempt, s.attempts.c.worker, s.attempts.c.kind, s.attempts.c.error)
            .where(s.attempts.c.run == self.run, s.attempts.c.job_id == job_id)
            .order_by(s.attempts.c.at)
        )
        with self._engine.begin() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    async def counts(self) -> list[JobCounts]:
        return await self._call(self._counts)

    def _counts(self) -> list[JobCounts]:
        c = s.jobs.c
        q = (
            select(c.model_id, c.mode, c.scenario, c.status, func.count())
            .where(c.run == self.run)
            .group_by(c.model_id, c.mode, c.scenario, c.status)
            .order_by(c.model_id, c.mode, c.scenario, c.status)
        )
        with self._engine.begin() as conn:
            return [JobCounts(*r) for r in conn.execute(q)]

    async def results(self) -> list[tuple[Job, str, dict[str, Any] | None, str | None]]:
        return await self._call(self._results)

    def _results(self) -> list[tuple[Job, str, dict[str, Any] | None, str | None]]:
        q = text(f"SELECT {_JOB_COLUMNS}, status, result, error FROM kw_jobs WHERE run = :run ORDER BY id")
        with self._engine.begin() as conn:
            rows = conn.execute(q, {"run": self.run}).fetchall()
        return [(_job(r), r[7], orjson.loads(r[8]) if r[8] else None, r[9]) for r in rows]

    async def close(self) -> None:
        self._engine.dispose()
