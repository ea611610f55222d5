"""Claiming jobs under leases (``SqlQueue``): a claim's statements (SQLite and PostgreSQL), heartbeats,
giving jobs back, expired leases.

A claim returns expired leases to pending, then takes up to ``n`` jobs in claim order (``draw``, then id: a
screened job's drawn place first), leaving some models out (``Queue.claim``), or up to ``n`` jobs of each of several groups of models in one transaction
(``Queue.claim_each``): one arm per group, each its own ``LIMIT``, so a scheduler keeps work in hand per
group without one round trip per group. ``LeaseTables`` is a mixin, like the other tables of ``sql``: it
uses the queue's ``_call``, ``_engine``, ``_clock`` and ``_params``, and ``RunTables._unmark_finalized``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import Select, func, or_, select, text, update

from ..jobs import Job
from . import schema as s
from .engine import RunStatements, on_db_thread
from .roles import ClaimQuota

__all__ = ["JOB_COLUMNS", "LeaseTables", "claim_sql", "held_by", "job_from_row", "jobs_where"]


JOB_COLUMNS = "id, model_id, mode, scenario, item, payload, attempts"


def jobs_where(*where: Any) -> Select[Any]:
    """``SELECT JOB_COLUMNS FROM kw_jobs WHERE ...``, for ``job_from_row``."""
    return select(*(s.jobs.c[name.strip()] for name in JOB_COLUMNS.split(","))).where(*where)


def job_from_row(row: Any) -> Job:
    """The ``Job`` of a row whose first columns are ``JOB_COLUMNS``."""
    return Job(
        id=row[0],
        model_id=row[1],
        mode=row[2],
        scenario_id=row[3],
        item=row[4],
        payload=orjson.loads(row[5]),
        attempts=row[6],
    )


def _arms(
    dialect: str, exclude: frozenset[str] | None, quotas: Sequence[ClaimQuota], params: dict[str, Any]
) -> list[str]:
    """One ``SELECT id`` of pending jobs per group (or one for a plain claim), in claim order, limited.

    A one-model group walks its model's pending jobs in claim order (``kw_jobs_pending_model``). A group
    of several models walks all pending jobs in claim order (``kw_jobs_pending``) and stops at ``n``: on
    SQLite the model test is kept off the indexes (``+``), so the planner never gathers every pending
    job of those models through the per-model index to sort them, once per claim."""
    base = "SELECT id FROM kw_jobs WHERE run = :run AND status = 'pending'"
    if exclude is not None:
        names = []
        for i, model in enumerate(sorted(exclude)):
            params[f"x{i}"] = model
            names.append(f":x{i}")
        excl = f" AND model_id NOT IN ({', '.join(names)})" if names else ""
        return [f"{base}{excl} ORDER BY draw, id LIMIT :n"]
    arms = []
    for i, quota in enumerate(quotas):
        names = []
        for j, model in enumerate(sorted(quota.models)):
            params[f"m{i}_{j}"] = model
            names.append(f":m{i}_{j}")
        params[f"n{i}"] = quota.n
        if len(names) == 1:
            test = f"model_id = {names[0]}"
        else:
            test = f"{'+' if dialect == 'sqlite' else ''}model_id IN ({', '.join(names)})"
        arms.append(f"{base} AND {test} ORDER BY draw, id LIMIT :n{i}")
    return arms


def claim_sql(
    dialect: str,
    now: str,
    params: dict[str, Any],
    *,
    exclude: frozenset[str] | None = None,
    quotas: Sequence[ClaimQuota] = (),
    bulk: bool = False,
) -> tuple[str, list[str]]:
    """The expiry statement and the claim's statements (one, or lease and read-after-commit when ``bulk``)."""
    arms = _arms(dialect, exclude, quotas, params)
    lease = (
        f"status = 'running', lease_owner = :w, lease_expires = {now} + :lease, updated_at = {now}, "
        "claim_key = :ck"
    )
    if dialect == "postgresql":
        return _postgres(arms, lease, now)
    # SQLite: BEGIN IMMEDIATE already serialises claims, so a plain subquery is exact.
    expire = (
        "UPDATE kw_jobs SET status = 'pending', lease_owner = NULL WHERE run = :run "
        f"AND status = 'running' AND lease_expires < {now}"
    )
    pending = arms[0] if len(arms) == 1 else " UNION ALL ".join(f"SELECT id FROM ({arm})" for arm in arms)
    if not bulk:
        return expire, [
            f"UPDATE kw_jobs SET {lease}, attempts = attempts + 1 WHERE run = :run AND id IN ({pending}) "
            f"RETURNING {JOB_COLUMNS}"
        ]
    # Lease, then read back what this claim leased (its key) after the commit: each statement yields
    # one row at most, as ``SqlQueue._bulk`` explains, where RETURNING would step once per job with the
    # write lock held; and the read takes no write lock at all.
    return expire, [
        f"UPDATE kw_jobs SET {lease}, attempts = attempts + 1 WHERE run = :run AND id IN ({pending})",
        f"SELECT json_group_array(json_array({JOB_COLUMNS})) FROM kw_jobs WHERE run = :run "
        "AND lease_owner = :w AND claim_key = :ck AND status = 'running'",
    ]


def _postgres(arms: list[str], lease: str, now: str) -> tuple[str, list[str]]:
    """PostgreSQL's statements: MATERIALIZED, so each CTE runs once and a claim takes at most n rows (a
    plain IN (subquery ... SKIP LOCKED) may be re-evaluated by the planner and take more). FOR UPDATE is
    not allowed in a UNION's arms, so each group is its own CTE and the union reads them."""
    expire = (
        "WITH gone AS MATERIALIZED (SELECT id FROM kw_jobs WHERE run = :run AND status = 'running' "
        f"AND lease_expires < {now} FOR UPDATE SKIP LOCKED) UPDATE kw_jobs j SET status = 'pending', "
        "lease_owner = NULL FROM gone WHERE j.run = :run AND j.id = gone.id"
    )
    if len(arms) == 1:
        ctes = f"picked AS MATERIALIZED ({arms[0]} FOR UPDATE SKIP LOCKED)"
    else:
        ctes = ", ".join(f"p{i} AS MATERIALIZED ({arm} FOR UPDATE SKIP LOCKED)" for i, arm in enumerate(arms))
        ctes += ", picked AS (" + " UNION ALL ".join(f"SELECT id FROM p{i}" for i in range(len(arms))) + ")"
    claim = (
        f"WITH {ctes} UPDATE kw_jobs j SET {lease}, attempts = j.attempts + 1 FROM picked "
        "WHERE j.run = :run AND j.id = picked.id RETURNING "
        + ", ".join(f"j.{c.strip()}" for c in JOB_COLUMNS.split(","))
    )
    return expire, [claim]


class _Claim:
    """One claim's key, and whether it is being sent again (a first try may have committed).

    A claim the caller names (``key``) is looked up every time it is sent; an unnamed one only when the
    database went away mid-claim and ``OnOneThread`` sends it again.
    """

    def __init__(self, key: str | None = None) -> None:
        self.key = key or uuid.uuid4().hex
        self._tries = 0 if key is None else 1

    def sent_again(self) -> bool:
        self._tries += 1
        return self._tries > 1


def held_by(run: str, worker: str, job_ids: Sequence[str]) -> tuple[Any, ...]:
    """The jobs of ``job_ids`` in ``run`` that ``worker`` holds and has not finished (its leases)."""
    return (
        s.jobs.c.run == run,
        s.jobs.c.id.in_(job_ids),
        s.jobs.c.lease_owner == worker,
        s.jobs.c.status == "running",
    )


class LeaseTables(RunStatements):
    """Claims, heartbeats, releases and requeues of ``SqlQueue``."""

    if TYPE_CHECKING:

        def _unmark_finalized(self, conn: Any) -> None: ...  # RunTables's

    async def claim(
        self, worker: str, n: int, lease_s: float, exclude_models: frozenset[str] = frozenset()
    ) -> list[Job]:
        return await self._call(self._claim, worker, {"n": n}, lease_s, exclude_models, (), _Claim())

    async def claim_each(
        self, worker: str, quotas: Sequence[ClaimQuota], lease_s: float, *, key: str | None = None
    ) -> list[Job]:
        quotas = [q for q in quotas if q.n > 0 and q.models]
        if not quotas:
            return []
        return await self._call(self._claim, worker, {}, lease_s, None, quotas, _Claim(key))

    def _claim(
        self,
        worker: str,
        extra: dict[str, Any],
        lease_s: float,
        exclude: frozenset[str] | None,
        quotas: Sequence[ClaimQuota],
        claim: _Claim,
    ) -> list[Job]:
        params = self._params(w=worker, lease=lease_s, ck=claim.key, **extra)
        again = claim.sent_again()
        expire, statements = claim_sql(
            self.dialect, self._clock.sql, params, exclude=exclude, quotas=quotas, bulk=self._bulk
        )
        with self._engine.begin() as conn:
            if again:  # the first try may have committed, its reply lost: its jobs are ours already
                j = s.jobs.c
                mine = (j.run == self.run, j.lease_owner == worker, j.claim_key == claim.key)
                rows = conn.execute(jobs_where(*mine, j.status == "running")).fetchall()
                if rows:
                    return sorted((job_from_row(r) for r in rows), key=lambda job: job.id)
            # A killed worker's expired leases return to pending in the claim's own transaction.
            conn.execute(text(expire), params)
            rows = conn.execute(text(statements[0]), params).fetchall() if len(statements) == 1 else []
            if len(statements) > 1:
                conn.execute(text(statements[0]), params)
        if len(statements) > 1:  # the jobs this claim leased (its key), read without the write lock
            with self._reading() as conn:
                rows = orjson.loads(conn.execute(text(statements[1]), params).scalar() or "[]")
        return sorted((job_from_row(r) for r in rows), key=lambda j: j.id)

    @on_db_thread
    def heartbeat(self, worker: str, lease_s: float) -> int:
        now = self._clock.expr()
        with self._engine.begin() as conn:
            res = conn.execute(
                update(s.jobs)
                .where(s.jobs.c.run == self.run, s.jobs.c.lease_owner == worker, s.jobs.c.status == "running")
                .values(lease_expires=now + lease_s)
            )
            conn.execute(update(s.workers).where(s.workers.c.id == worker).values(heartbeat_at=now))
        return int(res.rowcount or 0)

    @on_db_thread
    def release(self, worker: str, job_ids: list[str]) -> int:
        if not job_ids:
            return 0
        greatest = func.max if self.dialect == "sqlite" else func.greatest
        with self._engine.begin() as conn:
            res = conn.execute(
                update(s.jobs)
                .where(*held_by(self.run, worker, job_ids))
                .values(status="pending", lease_owner=None, attempts=greatest(s.jobs.c.attempts - 1, 0))
            )
        return int(res.rowcount or 0)

    async def release_unheld(self, worker: str, held: AbstractSet[str]) -> list[str]:
        return await self._call(self._release_unheld, worker, frozenset(held))

    def _release_unheld(self, worker: str, held: frozenset[str]) -> list[str]:
        j = s.jobs.c
        greatest = func.max if self.dialect == "sqlite" else func.greatest
        with self._engine.begin() as conn:
            leased = conn.execute(
                select(j.id).where(j.run == self.run, j.lease_owner == worker, j.status == "running")
            ).scalars()
            lost = sorted(set(leased) - held)
            if lost:
                conn.execute(
                    update(s.jobs)
                    .where(*held_by(self.run, worker, lost))
                    .values(status="pending", lease_owner=None, attempts=greatest(j.attempts - 1, 0))
                )
        return lost

    @on_db_thread
    def requeue_expired(self, stale_after_s: float | None = None) -> int:
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

    @on_db_thread
    def requeue_failed(self) -> int:
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
