"""The provider batch operations of a run (``batch_rows`` says what a batch row means).

``BatchTable`` is the store (``SqlQueue.batching``), over the queue's ``RunDatabase``. Leasing a batch
locks its row (``FOR UPDATE SKIP LOCKED`` on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` serialises), so two
processes never poll, or submit, the same batch at once.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson
from sqlalchemy import select, update

from ..jobs import Job
from . import schema as s
from .batch_rows import OPEN_BATCH, PARKED_UNTIL, BatchRecord, batch_owner
from .claims import held_by, job_from_row, jobs_where
from .engine import RunStatements, on_db_thread

__all__ = ["BatchTable"]


def _record(row: Any) -> BatchRecord:
    return BatchRecord(
        key=row.key,
        model_id=row.model_id,
        job_ids=tuple(orjson.loads(row.job_ids)),
        status=row.status,
        provider_id=row.provider_id,
        owner=row.owner,
        created_at=row.created_at,
        updated_at=row.updated_at,
        counts=orjson.loads(row.counts or "{}"),
        error=row.error,
    )


class BatchTable(RunStatements):
    """The provider batches of a run (the ``Batching`` role)."""

    @on_db_thread
    def batch_open(self, worker: str, key: str, model_id: str, job_ids: list[str], lease_s: float) -> int:
        now = self._clock.expr()
        with self._engine.begin() as conn:
            parked = conn.execute(
                update(s.jobs)
                .where(*held_by(self.run, worker, job_ids))
                .values(lease_owner=batch_owner(key), lease_expires=PARKED_UNTIL)
            )
            conn.execute(
                s.batches.insert().values(
                    run=self.run,
                    key=key,
                    model_id=model_id,
                    status="submitting",
                    job_ids=orjson.dumps(sorted(job_ids)).decode(),
                    owner=worker,
                    lease_expires=now + lease_s,
                    created_at=now,
                    updated_at=now,
                    counts="{}",
                )
            )
        return int(parked.rowcount or 0)

    async def batch_note(
        self,
        key: str,
        *,
        status: str | None = None,
        provider_id: str | None = None,
        counts: dict[str, int] | None = None,
        error: str | None = None,
    ) -> None:
        values: dict[str, Any] = {"updated_at": self._clock.params()["now"]}
        if status is not None:
            values["status"] = status
        if provider_id is not None:
            values["provider_id"] = provider_id
        if counts is not None:
            values["counts"] = orjson.dumps(counts).decode()
        if error is not None:
            values["error"] = error
        await self._call(self._batch_note, key, values)

    def _batch_note(self, key: str, values: dict[str, Any]) -> None:
        with self._engine.begin() as conn:
            conn.execute(
                update(s.batches).where(s.batches.c.run == self.run, s.batches.c.key == key).values(**values)
            )

    @on_db_thread
    def batch_lease(self, worker: str, lease_s: float, model_ids: frozenset[str]) -> list[BatchRecord]:
        now = self._clock.expr()
        b = s.batches.c
        q = select(s.batches).where(
            b.run == self.run,
            b.status.in_(OPEN_BATCH),
            b.model_id.in_(sorted(model_ids)),
            (b.owner == worker) | (b.owner.is_(None)) | (b.lease_expires < now),
        )
        if self.dialect == "postgresql":
            q = q.with_for_update(skip_locked=True)
        with self._engine.begin() as conn:
            rows = conn.execute(q.order_by(b.created_at)).fetchall()
            keys = [r.key for r in rows]
            if keys:
                conn.execute(
                    update(s.batches)
                    .where(b.run == self.run, b.key.in_(keys))
                    .values(owner=worker, lease_expires=now + lease_s)
                )
        return [replace(_record(r), owner=worker) for r in rows]

    @on_db_thread
    def batch_take(self, worker: str, key: str, lease_s: float) -> list[Job]:
        now = self._clock.expr()
        j = s.jobs.c
        mine = (j.run == self.run, j.lease_owner == batch_owner(key), j.status == "running")
        with self._engine.begin() as conn:
            rows = conn.execute(jobs_where(*mine)).fetchall()
            conn.execute(update(s.jobs).where(*mine).values(lease_owner=worker, lease_expires=now + lease_s))
        return sorted((job_from_row(r) for r in rows), key=lambda job: job.id)

    @on_db_thread
    def batches(self) -> list[BatchRecord]:
        q = select(s.batches).where(s.batches.c.run == self.run).order_by(s.batches.c.created_at)
        with self._reading() as conn:
            return [_record(r) for r in conn.execute(q)]
