"""The SQL queue: one implementation for SQLite (default) and PostgreSQL (many machines).

SQLAlchemy Core runs on one background thread per process (anyio.to_thread with a limiter of one), so
the event loop never blocks on the database and one connection's transactions never interleave.
SQLite runs in WAL mode and takes its write lock at BEGIN (``BEGIN IMMEDIATE``), so two processes on
one file wait for each other instead of failing with "database is locked". PostgreSQL claims with
``FOR UPDATE SKIP LOCKED`` over a partial index of pending jobs.
"""

from __future__ import annotations

import functools
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import orjson
from sqlalchemy import Connection, create_engine, event, func, inspect, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DBAPIError, OperationalError, ProgrammingError

from ..exceptions import QueueError, SchemaVersionError
from ..jobs import Job
from . import Failure, JobCounts
from . import schema as s

__all__ = ["SqlQueue", "safe_url"]

T = TypeVar("T")

_JOB_COLUMNS = "id, model_id, mode, scenario, item, payload, attempts"


def safe_url(url: str) -> str:
    """The URL with any password hidden, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<database url>"


def _make_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 60})

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    if parsed.get_backend_name() == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        return create_engine(parsed, pool_pre_ping=True, pool_size=2, max_overflow=2)
    raise QueueError(f"{safe_url(url)}: unsupported database (use sqlite:///FILE or postgresql://...)")


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


class SqlQueue:
    """A ``Queue`` in a SQLite file or a PostgreSQL database."""

    def __init__(self, url: str, run: str) -> None:
        self.run = run
        self.url = url
        self._engine = _make_engine(url)
        self.dialect = self._engine.dialect.name
        self._limiter = anyio.CapacityLimiter(1)
        self._ready = False

    # -- plumbing -------------------------------------------------------------------------------------

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(
            functools.partial(self._guarded, fn, *args), limiter=self._limiter
        )

    def _guarded(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            if not self._ready:
                self._ensure_schema()
            return fn(*args)
        except (OperationalError, ProgrammingError, DBAPIError) as exc:
            detail = str(getattr(exc, "orig", exc)).strip().splitlines()[0]
            raise QueueError(f"{safe_url(self.url)}: {detail}") from None

    def _ensure_schema(self) -> None:
        with self._engine.begin() as conn:
            if inspect(conn).has_table("kw_meta"):
                found = conn.execute(select(s.meta.c.value).where(s.meta.c.key == "schema_version")).scalar()
                if found is not None and int(found) != s.SCHEMA_VERSION:
                    raise SchemaVersionError(
                        f"{safe_url(self.url)}: this database has run-schema version {found}, but this "
                        f"knowwhen_runner reads version {s.SCHEMA_VERSION}; finish or read the run with the "
                        "knowwhen_runner release that wrote it, or start a new run folder (--db) for this one"
                    )
            s.metadata.create_all(conn)
            if conn.execute(select(s.meta.c.value).where(s.meta.c.key == "schema_version")).scalar() is None:
                conn.execute(s.meta.insert().values(key="schema_version", value=str(s.SCHEMA_VERSION)))
        self._ready = True

    def _insert(self, table: Any) -> Any:
        return (postgresql.insert if self.dialect == "postgresql" else sqlite.insert)(table)

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
                created_at=time.time(),
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
        }

    async def enqueue(self, jobs: list[Job], items: dict[tuple[str, str], dict[str, Any]]) -> int:
        return await self._call(self._enqueue, jobs, items)

    def _enqueue(self, jobs: list[Job], items: dict[tuple[str, str], dict[str, Any]]) -> int:
        item_rows = [
            {"run": self.run, "scenario": sc, "item": it, "payload": orjson.dumps(p).decode()}
            for (sc, it), p in items.items()
        ]
        job_rows = [
            {
                "run": self.run,
                "id": j.id,
                "model_id": j.model_id,
                "mode": j.mode,
                "scenario": j.scenario_id,
                "item": j.item,
                "payload": orjson.dumps(j.payload).decode(),
                "status": "pending",
                "attempts": 0,
                "updated_at": time.time(),
            }
            for j in jobs
        ]
        count = select(func.count()).select_from(s.jobs).where(s.jobs.c.run == self.run)
        with self._engine.begin() as conn:
            before = conn.execute(count).scalar_one()
            for chunk in range(0, len(item_rows), 5000):
                conn.execute(self._insert(s.items).on_conflict_do_nothing(), item_rows[chunk : chunk + 5000])
            for chunk in range(0, len(job_rows), 5000):
                conn.execute(self._insert(s.jobs).on_conflict_do_nothing(), job_rows[chunk : chunk + 5000])
            after = conn.execute(count).scalar_one()
        return int(after - before)

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

    def _claim(self, worker: str, n: int, lease_s: float, exclude: frozenset[str]) -> list[Job]:
        now = time.time()
        params: dict[str, Any] = {"run": self.run, "w": worker, "exp": now + lease_s, "now": now, "n": n}
        excl = ""
        if exclude:
            names = []
            for i, model in enumerate(sorted(exclude)):
                params[f"x{i}"] = model
                names.append(f":x{i}")
            excl = f" AND model_id NOT IN ({', '.join(names)})"
        if self.dialect == "postgresql":
            # The CTE is evaluated once: a plain IN (subquery ... SKIP LOCKED) may be re-run by the planner
            # and claim more than n rows.
            expire = (
                "WITH gone AS MATERIALIZED (SELECT id FROM kw_jobs WHERE run = :run AND status = 'running' "
                "AND lease_expires < :now FOR UPDATE SKIP LOCKED) UPDATE kw_jobs j SET status = 'pending', "
                "lease_owner = NULL FROM gone WHERE j.run = :run AND j.id = gone.id"
            )
            claim = (
                "WITH picked AS MATERIALIZED (SELECT id FROM kw_jobs WHERE run = :run AND status = 'pending'"
                f"{excl} ORDER BY id LIMIT :n FOR UPDATE SKIP LOCKED) UPDATE kw_jobs j SET status = 'running', "
                "lease_owner = :w, lease_expires = :exp, attempts = j.attempts + 1, updated_at = :now "
                "FROM picked WHERE j.run = :run AND j.id = picked.id RETURNING "
                + ", ".join(f"j.{c.strip()}" for c in _JOB_COLUMNS.split(","))
            )
        else:
            # An expired lease (a killed worker's) returns its job to pending, in the claim's transaction.
            expire = (
                "UPDATE kw_jobs SET status = 'pending', lease_owner = NULL WHERE run = :run "
                "AND status = 'running' AND lease_expires < :now"
            )
            claim = (
                "UPDATE kw_jobs SET status = 'running', lease_owner = :w, lease_expires = :exp, "
                "attempts = attempts + 1, updated_at = :now WHERE run = :run AND id IN "
                f"(SELECT id FROM kw_jobs WHERE run = :run AND status = 'pending'{excl} ORDER BY id LIMIT :n) "
                f"RETURNING {_JOB_COLUMNS}"
            )
        with self._engine.begin() as conn:
            conn.execute(text(expire), params)
            rows = conn.execute(text(claim), params).fetchall()
        return sorted((_job(r) for r in rows), key=lambda j: j.id)

    async def heartbeat(self, worker: str, lease_s: float) -> int:
        return await self._call(self._heartbeat, worker, lease_s)

    def _heartbeat(self, worker: str, lease_s: float) -> int:
        now = time.time()
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
        with self._engine.begin() as conn:
            res = conn.execute(
                update(s.jobs)
                .where(
                    s.jobs.c.run == self.run,
                    s.jobs.c.id.in_(job_ids),
                    s.jobs.c.lease_owner == worker,
                    s.jobs.c.status == "running",
                )
                .values(
                    status="pending",
                    lease_owner=None,
                    attempts=func.max(s.jobs.c.attempts - 1, 0)
                    if self.dialect == "sqlite"
                    else func.greatest(s.jobs.c.attempts - 1, 0),
                )
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
                    s.jobs.c.lease_expires < time.time(),
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
        return int(res.rowcount or 0)

    # -- outcomes -------------------------------------------------------------------------------------

    async def complete(self, worker: str, results: list[tuple[str, dict[str, Any]]]) -> int:
        return await self._call(self._complete, worker, results) if results else 0

    def _complete(self, worker: str, results: list[tuple[str, dict[str, Any]]]) -> int:
        now = time.time()
        stmt = text(
            "UPDATE kw_jobs SET status = 'done', result = :result, error = NULL, lease_owner = NULL, "
            "updated_at = :now WHERE run = :run AND id = :id AND status <> 'done'"
        )
        rows = [
            {"run": self.run, "id": jid, "result": orjson.dumps(r).decode(), "now": now} for jid, r in results
        ]
        recorded = 0
        with self._engine.begin() as conn:
            for row in rows:  # per-row rowcount: executemany's is not reliable on every driver
                recorded += conn.execute(stmt, row).rowcount or 0
            conn.execute(
                update(s.workers)
                .where(s.workers.c.id == worker)
                .values(jobs_done=s.workers.c.jobs_done + recorded, heartbeat_at=now)
            )
        return recorded

    async def fail(self, worker: str, failures: list[Failure]) -> int:
        return await self._call(self._fail, worker, failures) if failures else 0

    def _fail(self, worker: str, failures: list[Failure]) -> int:
        now, n = time.time(), 0
        with self._engine.begin() as conn:
            for f in failures:
                current = conn.execute(
                    select(s.jobs.c.status, s.jobs.c.attempts).where(
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
                        at=now,
                    )
                )
                conn.execute(
                    update(s.jobs)
                    .where(s.jobs.c.run == self.run, s.jobs.c.id == f.job_id)
                    .values(
                        status="failed" if f.final else "pending",
                        error=f.error,
                        lease_owner=None,
                        updated_at=now,
                    )
                )
                n += 1
        return n

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

    # -- workers --------------------------------------------------------------------------------------

    async def register_worker(self, worker: str) -> None:
        await self._call(self._register_worker, worker)

    def _register_worker(self, worker: str) -> None:
        import os

        now = time.time()
        with self._engine.begin() as conn:
            conn.execute(
                self._insert(s.workers)
                .values(
                    id=worker,
                    run=self.run,
                    host=socket.gethostname(),
                    pid=os.getpid(),
                    started_at=now,
                    heartbeat_at=now,
                    jobs_done=0,
                )
                .on_conflict_do_nothing()
            )

    async def stop_worker(self, worker: str) -> None:
        await self._call(self._stop_worker, worker)

    def _stop_worker(self, worker: str) -> None:
        with self._engine.begin() as conn:
            conn.execute(update(s.workers).where(s.workers.c.id == worker).values(stopped_at=time.time()))

    async def workers(self) -> list[dict[str, Any]]:
        return await self._call(self._workers)

    def _workers(self) -> list[dict[str, Any]]:
        q = select(s.workers).where(s.workers.c.run == self.run).order_by(s.workers.c.started_at)
        with self._engine.begin() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    # -- cache ----------------------------------------------------------------------------------------

    async def cache_get(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        return await self._call(self._cache_get, keys) if keys else {}

    def _cache_get(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        with self._engine.begin() as conn:
            for chunk in range(0, len(keys), 500):
                q = select(s.cache.c.key, s.cache.c.response).where(
                    s.cache.c.key.in_(keys[chunk : chunk + 500])
                )
                out.update({k: orjson.loads(v) for k, v in conn.execute(q)})
        return out

    async def cache_put(self, entries: list[tuple[str, str, dict[str, Any]]]) -> None:
        if entries:
            await self._call(self._cache_put, entries)

    def _cache_put(self, entries: list[tuple[str, str, dict[str, Any]]]) -> None:
        now = time.time()
        rows = [
            {"key": k, "model": m, "response": orjson.dumps(r).decode(), "created_at": now}
            for k, m, r in entries
        ]
        stmt = self._insert(s.cache)
        stmt = stmt.on_conflict_do_update(
            index_elements=["key"],
            set_={"response": stmt.excluded.response, "created_at": stmt.excluded.created_at},
        )
        with self._engine.begin() as conn:
            conn.execute(stmt, rows)

    async def cache_stats(self) -> dict[str, int]:
        return await self._call(self._cache_stats)

    def _cache_stats(self) -> dict[str, int]:
        q = select(s.cache.c.model, func.count()).group_by(s.cache.c.model)
        with self._engine.begin() as conn:
            return {m: int(n) for m, n in conn.execute(q)}

    async def cache_clear(self, model: str | None = None) -> int:
        return await self._call(self._cache_clear, model)

    def _cache_clear(self, model: str | None) -> int:
        stmt = s.cache.delete()
        if model is not None:
            stmt = stmt.where(s.cache.c.model == model)
        with self._engine.begin() as conn:
            return int(conn.execute(stmt).rowcount or 0)

    async def close(self) -> None:
        self._engine.dispose()
