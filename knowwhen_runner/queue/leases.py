"""Claims and leases of ``SqlQueue``: claiming jobs, heartbeats, giving jobs back, expired leases.

A mixin, like ``side_tables``: it uses the queue's ``_call``, ``_engine``, ``_clock`` and ``_params``,
and ``RunTables._unmark_finalized``. The claim's statements are built in ``claims``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import func, or_, select, text, update

from ..jobs import Job
from . import ClaimQuota
from . import schema as s
from .claims import claim_sql, job_from_row, jobs_where
from .engine import RunStatements

__all__ = ["LeaseTables", "held_by"]


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
