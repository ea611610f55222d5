"""The SQL queue: one implementation for SQLite (default) and PostgreSQL (many machines).

SQLAlchemy Core runs on one background thread per process (anyio.to_thread with a limiter of one), so
the event loop never blocks on the database and one connection's transactions never interleave.
SQLite runs in WAL mode and takes its write lock at BEGIN, so two processes on one file wait for each
other. PostgreSQL claims with ``FOR UPDATE SKIP LOCKED`` in a CTE over a partial index of pending jobs,
and keeps leases on the database server's clock (see ``engine.py``).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

import orjson
from sqlalchemy import String, bindparam, func, or_, select, text, update
from sqlalchemy.dialects import postgresql, sqlite

from ..crashpoints import crashpoint
from ..exceptions import QueueError
from ..jobs import Items, Job
from . import ASIDE, SET_ASIDE, ClaimQuota, Failure, JobCounts, JobResult
from . import schema as s
from .answers import AnswerTables
from .batch_table import BatchTable
from .budget import ControlBudget
from .claims import JOB_COLUMNS, claim_sql
from .controls import ControlTables
from .engine import DbClock, make_engine, safe_url
from .side_tables import SideTables

__all__ = ["SqlQueue", "safe_url"]

T = TypeVar("T")

_OPEN = "('pending', 'running')"
_COMPLETABLE = "('pending', 'running', 'failed')"  # not done, not set aside


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
# The batch is a sorted (so materialised) subquery and the status test is kept off the indexes (``+``):
# the planner then walks the batch and finds each job by its primary key. Without both it walks all the
# run's jobs once per batch row (0.5 s for 50 rows of 20,000). ``tests/unit/test_sql_plans.py`` pins it.
_SQLITE_COMPLETE = (
    "UPDATE kw_jobs SET status = 'done', result = j.result, error = NULL, lease_owner = NULL, updated_at = ? "
    "FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS result "
    "FROM json_each(?) ORDER BY 1) AS j WHERE kw_jobs.run = ? AND kw_jobs.id = j.id "
    f"AND +kw_jobs.status IN {_COMPLETABLE}"
)


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


class SqlQueue(AnswerTables, ControlTables, ControlBudget, SideTables, BatchTable):
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
        with self._reading() as conn:
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
            # A rerun records its config (workers that join later read it); the first meta stays.
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["name"], set_={"config_text": stmt.excluded.config_text}
                )
            )
        info = self._run_info()
        assert info is not None
        return info

    async def run_info(self) -> dict[str, Any] | None:
        return await self._call(self._run_info)

    def _run_info(self) -> dict[str, Any] | None:
        with self._reading() as conn:
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

    async def update_meta(self, patch: dict[str, Any]) -> dict[str, Any]:
        """Merge ``patch`` into the run's meta (top-level keys replaced); returns the new meta."""
        return await self._call(self._update_meta, patch)

    def _update_meta(self, patch: dict[str, Any]) -> dict[str, Any]:
        with self._engine.begin() as conn:
            raw = conn.execute(select(s.runs.c.meta).where(s.runs.c.name == self.run)).scalar()
            if raw is None:
                raise QueueError(f"{safe_url(self.url)}: run {self.run!r} is not in this database")
            meta = {**orjson.loads(raw), **patch}
            conn.execute(
                update(s.runs).where(s.runs.c.name == self.run).values(meta=orjson.dumps(meta).decode())
            )
        return meta

    async def enqueue(
        self,
        jobs: list[Job],
        items: Items,
        *,
        whole_plan: AbstractSet[str] | None = None,
    ) -> int:
        return await self._call(self._enqueue, jobs, items, whole_plan)

    def _enqueue(
        self,
        jobs: list[Job],
        items: Items,
        whole_plan: AbstractSet[str] | None,
    ) -> int:
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
            statuses: dict[str, str] = {
                r[0]: r[1]
                for r in conn.exec_driver_sql(f"SELECT id, status FROM kw_jobs WHERE run = {ph}", (self.run,))
            }
            changed = self._set_plan(conn, statuses, whole_plan) if whole_plan is not None else 0
            have_jobs = set(statuses)
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
            if added or changed:
                self._unmark_finalized(conn)
        return added

    def _set_plan(self, conn: Any, statuses: dict[str, str], plan: AbstractSet[str]) -> int:
        """Set aside the jobs ``plan`` does not hold, and bring back the set-aside ones it holds again."""
        ph = self._placeholder
        leave = [(self.run, i) for i, st in statuses.items() if i not in plan and not st.startswith(ASIDE)]
        back = [(self.run, i) for i, st in statuses.items() if i in plan and st.startswith(ASIDE)]
        aside = (
            f"UPDATE kw_jobs SET status = CASE status WHEN 'running' THEN '{ASIDE}pending' "
            f"ELSE '{ASIDE}' || status END, lease_owner = NULL WHERE run = {ph} AND id = {ph}"
        )
        live = f"UPDATE kw_jobs SET status = SUBSTR(status, {len(ASIDE) + 1}) WHERE run = {ph} AND id = {ph}"
        for sql, rows in ((aside, leave), (live, back)):
            for chunk in range(0, len(rows), 5000):
                conn.exec_driver_sql(sql, rows[chunk : chunk + 5000])
        return len(leave) + len(back)

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

    def _unmark_finalized(self, conn: Any) -> None:
        conn.execute(
            update(s.runs).where(s.runs.c.name == self.run).values(finalized_at=None, finalized_by=None)
        )

    async def items(self, scenario_id: str | None = None) -> Items:
        return await self._call(self._items, scenario_id)

    def _items(self, scenario_id: str | None) -> Items:
        q = select(s.items.c.scenario, s.items.c.item, s.items.c.payload).where(s.items.c.run == self.run)
        if scenario_id is not None:
            q = q.where(s.items.c.scenario == scenario_id)
        with self._reading() as conn:
            return {(r[0], r[1]): orjson.loads(r[2]) for r in conn.execute(q)}

    # -- claims and leases ----------------------------------------------------------------------------

    async def claim(
        self, worker: str, n: int, lease_s: float, exclude_models: frozenset[str] = frozenset()
    ) -> list[Job]:
        return await self._call(self._claim, worker, {"n": n}, lease_s, exclude_models, ())

    async def claim_each(self, worker: str, quotas: Sequence[ClaimQuota], lease_s: float) -> list[Job]:
        quotas = [q for q in quotas if q.n > 0 and q.models]
        if not quotas:
            return []
        return await self._call(self._claim, worker, {}, lease_s, None, quotas)

    def _claim(
        self,
        worker: str,
        extra: dict[str, Any],
        lease_s: float,
        exclude: frozenset[str] | None,
        quotas: Sequence[ClaimQuota],
    ) -> list[Job]:
        params = self._params(w=worker, lease=lease_s, **extra)
        expire, claim = claim_sql(
            self.dialect, self._clock.sql, params, exclude=exclude, quotas=quotas, bulk=self._bulk
        )
        with self._engine.begin() as conn:
            # A killed worker's expired leases return to pending in the claim's own transaction.
            conn.execute(text(expire), params)
            if len(claim) == 1:
                rows = conn.execute(text(claim[0]), params).fetchall()
            else:
                pick, lease, read = claim
                params["ids"] = conn.execute(text(pick), params).scalar()
                conn.execute(text(lease), params)
                rows = orjson.loads(conn.execute(text(read), params).scalar() or "[]")
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

    async def requeue_expired(self, stale_after_s: float | None = None) -> int:
        return await self._call(self._requeue_expired, stale_after_s)

    def _requeue_expired(self, stale_after_s: float | None) -> int:
        now = self._clock.expr()
        gone = s.jobs.c.lease_expires < now
        if stale_after_s is not None:  # a worker not heard from for this long is gone (kill -9, lost node)
            stale = select(s.workers.c.id).where(
                s.workers.c.run == self.run, s.workers.c.heartbeat_at < now - stale_after_s
            )
            gone = or_(gone, s.jobs.c.lease_owner.in_(stale))
        with self._engine.begin() as conn:
            res = conn.execute(
                update(s.jobs)
                .where(s.jobs.c.run == self.run, s.jobs.c.status == "running", gone)
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
        done_rows = [(jid, orjson.dumps(r).decode()) for jid, r in results]
        with self._engine.begin() as conn:
            crashpoint("record")  # a kill here rolls the whole batch back (its responses are in the cache)
            recorded = self._complete_in(conn, worker, done_rows, stamp) if done_rows else 0
            for f in failures:
                recorded += self._fail_one(conn, worker, f)
        return recorded

    def _complete_in(self, conn: Any, worker: str, rows: list[tuple[str, str]], stamp: float) -> int:
        if self._bulk:
            sql = _SQLITE_COMPLETE
            recorded = int(conn.exec_driver_sql(sql, (stamp, orjson.dumps(rows).decode(), self.run)).rowcount)
        else:
            ph = self._placeholder
            sqlite_now = self.dialect == "sqlite"
            now = ph if sqlite_now else self._clock.sql
            sql = (
                f"UPDATE kw_jobs SET status = 'done', result = {ph}, error = NULL, lease_owner = NULL, "
                f"updated_at = {now} WHERE run = {ph} AND id = {ph} AND status IN {_COMPLETABLE}"
            )
            params = [(r, *((stamp,) if sqlite_now else ()), self.run, jid) for jid, r in rows]
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

    async def take_stage(self, stage: str, worker: str) -> str:
        return await self._call(self._take_stage, stage, worker)

    def _take_stage(self, stage: str, worker: str) -> str:
        key = "stage:" + hashlib.sha256(f"{self.run}\0{stage}".encode()).hexdigest()[:40]
        with self._engine.begin() as conn:
            conn.execute(self._insert(s.meta).values(key=key, value=worker).on_conflict_do_nothing())
            return str(conn.execute(select(s.meta.c.value).where(s.meta.c.key == key)).scalar_one())

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
        with self._reading() as conn:
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
        tally: dict[tuple[str, str, str, str], int] = {}
        with self._reading() as conn:
            for model, mode, scenario, status, n in conn.execute(q):
                key = (model, mode, scenario, SET_ASIDE if status.startswith(ASIDE) else status)
                tally[key] = tally.get(key, 0) + n
        return [JobCounts(*k, n) for k, n in sorted(tally.items())]

    async def done_lately(self, seconds: float) -> dict[str, tuple[int, float]]:
        return await self._call(self._done_lately, seconds)

    def _done_lately(self, seconds: float) -> dict[str, tuple[int, float]]:
        now = self._clock.sql
        q = text(
            f"SELECT model_id, count(*), {now} - min(updated_at) FROM kw_jobs WHERE run = :run "
            f"AND status = 'done' AND updated_at >= {now} - :s GROUP BY model_id"
        )
        with self._reading() as conn:
            rows = conn.execute(q, self._params(s=seconds)).fetchall()
        return {model: (int(n), max(0.0, float(age))) for model, n, age in rows}

    async def results(self, scenarios: AbstractSet[str] | None = None) -> list[JobResult]:
        return await self._call(self._results, scenarios)

    def _results(self, scenarios: AbstractSet[str] | None) -> list[JobResult]:
        only = " AND scenario IN :scenarios" if scenarios is not None else ""
        q = text(
            f"SELECT {JOB_COLUMNS}, status, result, error FROM kw_jobs WHERE run = :run "
            f"AND status NOT LIKE '{ASIDE}%'{only} ORDER BY id"
        )
        params: dict[str, Any] = {"run": self.run}
        if scenarios is not None:
            q = q.bindparams(bindparam("scenarios", expanding=True, type_=String))
            params["scenarios"] = sorted(scenarios)
        with self._reading() as conn:
            rows = conn.execute(q, params).fetchall()
        return [JobResult(_job(r), r[7], orjson.loads(r[8]) if r[8] else None, r[9]) for r in rows]
